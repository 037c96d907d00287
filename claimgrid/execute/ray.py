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
import socket
import time
from pathlib import Path

from claimgrid.errors import ClaimgridError

CONNECT_TIMEOUT_S = 5.0  # an unreachable --address is one line in seconds, not Ray's 10-minute retry


def preflight(address: str | None) -> None:
    """Refuse, in one line and before anything is written, a grid whose cluster cannot be
    reached: Ray missing, no local cluster for ``auto``, or a GCS address that does not
    accept a TCP connection within ``CONNECT_TIMEOUT_S``."""
    _ray()
    target = address or "auto"
    if target in ("auto", "local"):
        # `ray start` records the running cluster's GCS address here (Ray's own convention).
        current = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
        if not current.is_file():
            raise ClaimgridError(
                "--address auto: no Ray cluster is running on this machine (start one with "
                "`uv run --extra ray ray start --head`, or pass --address HOST:PORT)"
            )
        target = current.read_text().strip()
    hostport = target.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ClaimgridError(f"--address {address}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ClaimgridError(
            f"--address {address or target}: cannot reach a Ray cluster at {host}:{port} within "
            f"{CONNECT_TIMEOUT_S:.0f} s ({exc.strerror or exc}); nothing was written"
        ) from None


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


def execute(todo, settings, plan: dict, on_result, log) -> dict:
    """Run ``todo`` across the cluster at ``plan["address"]``; ``on_result(cell, CellResult,
    node)`` is called in the driver for every finished cell (``node``: the record's
    :class:`~claimgrid.store.record.RunNode` fields). Each node runs at most ``plan["jobs"]``
    cells at once (default: its CPU count), never more than ``plan["max_inflight"]``.
    ``plan["may_start"]()`` is asked before every cell is sent: once it is false (the grid's
    budget is reached), no node starts another run and the rest are returned as
    ``not_started``. Returns facts about the execution (per-node slots and runs, runs lost
    with a node, runs not started)."""
    address, jobs, max_inflight = plan.get("address"), plan.get("jobs"), plan.get("max_inflight")
    may_start = plan.get("may_start") or (lambda: True)
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
        if max_inflight:
            per_node = min(per_node, max_inflight)
        actor = runner_cls.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False),
            max_concurrency=per_node,
        ).remote(settings, todo)
        actors.append(
            {
                "actor": actor,
                "slots": per_node,
                "busy": 0,
                "alive": True,
                "node": n["NodeID"][:12],
                "address": n.get("NodeManagerAddress"),
                "runs": 0,
            }
        )
    log(
        f"ray: {len(actors)} nodes, {sum(a['slots'] for a in actors)} slots ("
        + ", ".join(f"{a['node']} @ {a['address']}: {a['slots']}" for a in actors)
        + ")"
    )

    queue = list(todo)
    pending: dict = {}
    lost: list[str] = []
    not_started: list[str] = []
    t0 = time.monotonic()
    while queue or pending:
        if queue and not may_start():
            not_started.extend(c.run_id for c in queue)
            queue.clear()
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
            a["runs"] += 1
            on_result(cell, result, {"backend": "ray", "node_id": a["node"], "address": a["address"]})
    if queue:
        lost.extend(c.run_id for c in queue)
    for a in actors:
        if a["alive"]:
            try:
                ray.get(a["actor"].close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a node dying at the very end changes no record
                pass
            ray.kill(a["actor"])
    return {
        "backend": "ray",
        "nodes": len(actors),
        "per_node": [
            {"node_id": a["node"], "address": a["address"], "slots": a["slots"], "runs": a["runs"], "alive": a["alive"]}
            for a in actors
        ],
        "lost": lost,
        "not_started": not_started,
        "wall_s": round(time.monotonic() - t0, 1),
    }
