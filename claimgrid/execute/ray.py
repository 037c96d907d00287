"""The Ray backend: ``grid.py run --backend ray --address ADDRESS``.

One actor per alive Ray node, pinned to it (node affinity, not soft). Each actor opens a
:class:`claimgrid.execute.node.Node` there: it builds the framework venvs from the same locks
(a no-op stamp check where they exist), starts its own loopback gateway and warm parents
(run tokens never cross the network) and returns each run's record and evidence to the
driver, which stays the single writer of the ledger. An actor runs ``jobs`` cells at once
(threaded actor), default the node's CPU count.

A node that dies loses only its in-flight runs: their futures fail, the grid goes on on
the other nodes, and the lost cells stay missing so ``--resume`` re-runs them (with any
backend). Every node needs this project at the same path and commit (a clone on each
machine), and uv; see docs/ray.md.

Ray is an optional extra (``uv run --extra ray ...``): importing this module without it
raises a one-line ``ClaimgridError``.
"""

from __future__ import annotations

import os
import time

from claimgrid.errors import ClaimgridError


def _ray():
    # When the driver was started by `uv run`, Ray would start every worker with `uv run`
    # in the worker's own folder, where this project's environment is not found (measured:
    # "No module named 'ray'" in each worker). Workers use the node's own interpreter instead.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError:
        raise ClaimgridError(
            "--backend ray needs the ray extra: uv run --extra ray grid.py run --backend ray ..."
        ) from None
    return ray


class _NodeRunner:
    """The actor body (decorated with ``ray.remote`` at run time, so importing needs no Ray)."""

    def __init__(self, settings, cells):
        import socket

        from claimgrid.execute.node import Node

        self.node = Node(settings)
        self.node.prepare(cells)
        self.host = socket.gethostname()

    def run(self, cell):
        return self.node.run(cell)

    def where(self):
        import os

        return {"host": self.host, "pid": os.getpid()}

    def close(self):
        self.node.close()


def execute(todo, settings, address: str | None, jobs: int | None, on_result, log) -> dict:
    """Run ``todo`` across the cluster at ``address``; ``on_result(cell, CellResult)`` is
    called in the driver for every finished cell. Returns facts about the execution
    (nodes used, runs lost with a node)."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        from claimgrid import ROOT

        # Workers import claimgrid from this project's folder (the same path on every node).
        ray.init(
            address=address or "auto",
            logging_level="ERROR",
            log_to_driver=False,
            ignore_reinit_error=True,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
        )
    except Exception as exc:  # noqa: BLE001 - any connection failure is one line for the user
        raise ClaimgridError(f"--address {address or 'auto'}: cannot connect to a Ray cluster: {exc}") from None
    runner_cls = ray.remote(num_cpus=0, max_restarts=0)(_NodeRunner)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        raise ClaimgridError(f"--address {address}: the Ray cluster has no alive node")
    actors = []
    for n in nodes:
        per_node = jobs or max(1, int(n.get("Resources", {}).get("CPU", 1)))
        actor = runner_cls.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False),
            max_concurrency=per_node,
        ).remote(settings, todo)
        actors.append({"actor": actor, "slots": per_node, "busy": 0, "alive": True, "node": n["NodeID"][:12]})
    log(f"ray: {len(actors)} nodes, {sum(a['slots'] for a in actors)} slots")

    queue = list(todo)
    pending: dict = {}
    lost: list[str] = []
    t0 = time.monotonic()
    while queue or pending:
        for a in actors:
            while a["alive"] and queue and a["busy"] < a["slots"]:
                cell = queue.pop(0)
                pending[a["actor"].run.remote(cell)] = (cell, a)
                a["busy"] += 1
        if not pending:
            break  # every node is gone: what is left stays missing for --resume
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            cell, a = pending.pop(ref)
            a["busy"] -= 1
            try:
                result = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the node (or its actor) died with this run
                if a["alive"]:
                    log(f"ray: node {a['node']} lost ({type(exc).__name__}); its in-flight runs stay missing")
                a["alive"] = False
                lost.append(cell.run_id)
                continue
            on_result(cell, result)
    if queue:
        lost.extend(c.run_id for c in queue)
    for a in actors:
        if a["alive"]:
            try:
                ray.get(a["actor"].close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a node dying at the very end changes no record
                pass
            ray.kill(a["actor"])
    return {"backend": "ray", "nodes": len(actors), "lost": lost, "wall_s": round(time.monotonic() - t0, 1)}
