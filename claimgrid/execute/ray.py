"""The Ray backend: ``grid.py run --backend ray --address ADDRESS``.

One actor per alive Ray node, pinned to it (node affinity, not soft). Each actor opens a
:class:`claimgrid.execute.node.Node` there: it builds the framework venvs from the same locks
(a no-op stamp check where they exist), starts its own loopback gateway and warm parents
(run tokens never cross the network) and returns each run's record and evidence to the
driver, which stays the single writer of the ledger.

Each node admits runs as the local backend does (claimgrid.execute.admission): ``jobs``
runs using CPU, sized by the node's own CPUs (Ray's ``CPU`` resource of that node; ``--jobs``
overrides it for every node), more while runs wait (up to ``max_inflight``), and its warm
parents preload ``jobs`` at a time. The queue stays in the driver: it holds one
reservation request per node (``admit``), which the node answers once its gate lets a run
start, with the frameworks whose warm parents are ready; only then does the driver pick a
cell (``admission.next_cell``) and send it. So no cell waits queued on a busy node.

The verify cache is shared: one :class:`claimgrid.verify.cache.SharedResults` actor beside
the driver, asked by every node's cache before it tests a workspace, so each distinct test
runs once per grid (as locally), not once per node.

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

    def __init__(self, settings, cells, schedule: dict, board=None, where: tuple[str, str | None] = ("", None)):
        """``where``: the node's id (its label) and address as the driver's Ray reports them,
        named by every record this node builds."""
        import socket

        from claimgrid.execute.admission import Admission, NodeGate
        from claimgrid.execute.node import Node
        from claimgrid.store.record import RunNode

        node_id, address = where
        shared = _BoardClient(board, node_id) if board is not None else None
        here = RunNode(backend="ray", node_id=node_id, address=address)
        self.node = Node(settings, cpus=schedule["jobs"], shared_results=shared, where=here)
        self.node.prepare(cells)
        self.gate = NodeGate(Admission(schedule["jobs"], schedule["max_inflight"], self.node.launcher.running_pids))
        self.frameworks = sorted({c.framework for c in cells})
        self.host = socket.gethostname()

    def admit(self):
        """Once the node's gate lets one more run start: the frameworks ready to run now
        (None: the node is closing). The slot is the caller's until it calls ``release``
        (after taking a run's result, or instead of a run)."""
        if not self.gate.reserve():
            return None
        return [fw for fw in self.frameworks if self.node.launcher.ready(fw)]

    def run(self, cell):
        """One run in the slot ``admit`` reserved. The slot is released by the driver once it
        has taken the result (``release``): were it freed here, the node's next ``admit`` could
        reach the driver before this result, and a cell be sent past a budget this run crossed."""
        try:
            return self.node.run(cell)
        except BaseException:
            self.gate.release()
            raise

    def release(self):
        self.gate.release()

    def where(self):
        import os

        return {"host": self.host, "pid": os.getpid()}

    def facts(self) -> dict:
        """The gate's figures and the node's warm-parent preloads at once."""
        return {**self.gate.admission.facts(), "prewarm_parallel": self.node.prewarm_parallel}

    def sweep(self) -> list[str]:
        """Remove dead nodes' work folders on this machine (claimgrid.execute.node.sweep_dead)."""
        from claimgrid.execute.node import sweep_dead

        return sweep_dead()

    def close(self):
        self.gate.close()
        self.node.close()
        return self.node.swept


class _BoardClient:
    """A node's handle on the grid's shared verify results (claimgrid.verify.cache.Shared).
    A board that cannot be reached answers "compute": it costs a test run, never a result."""

    def __init__(self, board, node: str):
        self.board, self.node = board, node

    def claim(self, key: str, run_id: str):
        try:
            ref = self.board.claim.remote(key, run_id, self.node)
            return tuple(_ray().get(ref))
        except Exception:  # noqa: BLE001 - the board's process is gone: test here
            return ("compute", None, None)

    def settle(self, key: str, result, run_id: str) -> None:
        try:
            ref = self.board.settle.remote(key, result, run_id, self.node)
            _ray().get(ref)
        except Exception:  # noqa: BLE001 - as above
            pass


def node_schedule(cpus: float | None, jobs: int | None, max_inflight: int | None, connections: int = 0) -> dict:
    """One node's admission limits: ``jobs`` (the flag, else the node's CPUs, at least 1) and
    ``max_inflight`` (the flag, else ``admission.default_max_inflight``); the flag caps both."""
    from claimgrid.execute.admission import default_max_inflight

    node_jobs = jobs or max(1, int(cpus or 1))
    if max_inflight:
        node_jobs = min(node_jobs, max_inflight)
    inflight = max_inflight or default_max_inflight(node_jobs, connections)
    return {"jobs": node_jobs, "max_inflight": max(inflight, node_jobs)}


def execute(todo, settings, plan: dict, on_result, log) -> dict:
    """Run ``todo`` across the cluster at ``plan["address"]``; ``on_result(cell, CellResult)``
    is called in the driver for every finished cell (its record names the node it ran on:
    :class:`~claimgrid.store.record.RunNode`, set by the node when it built the record).
    Each node admits runs through its own gate (module docstring) sized by
    :func:`node_schedule` from its CPUs, ``plan["jobs"]``, ``plan["max_inflight"]`` and
    ``plan["connections"]`` (real providers' connection limits). ``plan["may_start"]()`` is
    asked before every cell is sent: once it is false (the grid's budget is reached), no node
    starts another run and the rest are returned as ``not_started``. Returns facts about the
    execution (per-node slots, gate figures and runs, runs lost with a node, runs not started,
    the shared verify cache's figures, the dead nodes' folders removed)."""
    ray = _connect(plan.get("address"))
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        raise ClaimgridError(f"--address {plan.get('address')}: the Ray cluster has no alive node")
    cluster = _Cluster(ray, todo, plan.get("may_start") or (lambda: True), on_result, log)
    cluster.start(nodes, settings, plan)
    cluster.dispatch()
    return cluster.close()


def _connect(address: str | None):
    """Ray, connected to the cluster at ``address`` (one line for the user when it cannot be)."""
    ray = _ray()
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
    return ray


class _Cluster:
    """One ``execute`` in the driver: the node actors, the shared verify results, the queue.

    Steps: :meth:`start` (an actor per alive node, the board), :meth:`dispatch` (cells sent
    as nodes admit them, results handed to ``on_result``), :meth:`close` (facts, sweep, stop)."""

    def __init__(self, ray, todo, may_start, on_result, log):
        import collections

        from claimgrid.execute.admission import LongFirst, spread

        self.ray, self.may_start, self.on_result, self.log = ray, may_start, on_result, log
        self.todo = list(todo)
        self.queue = collections.deque(spread(list(todo), key=lambda c: c.model))
        self.long_first = LongFirst()  # the local backend's rule, on the driver's queue
        self.began: dict = {}  # a run's ref -> when it was sent
        self.pending: dict = {}  # ref -> ("admit", None, actor) | ("run", cell, actor)
        self.lost: list[str] = []
        self.not_started: list[str] = []
        self.actors: list[dict] = []
        self.board = None
        self.t0 = time.monotonic()

    def start(self, nodes: list[dict], settings, plan: dict) -> None:
        """One actor per node of ``nodes`` (Ray's alive ones), pinned to it, with the node's
        schedule and identity; the grid's shared verify results beside the driver (when the
        verify cache is on)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        schedules = [
            node_schedule(n.get("Resources", {}).get("CPU"), plan.get("jobs"), plan.get("max_inflight"),
                          plan.get("connections", 0))
            for n in nodes
        ]  # fmt: skip
        if settings.spec.verify_cache:
            from claimgrid.verify.cache import SharedResults

            # Beside the driver (its node), so it lives as long as the grid; every test run of a
            # node in flight may wait on it at once.
            here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=True)
            self.board = (
                ray.remote(num_cpus=0, max_restarts=0)(SharedResults)
                .options(scheduling_strategy=here, max_concurrency=sum(s["max_inflight"] for s in schedules) + 8)
                .remote()
            )
        runner_cls = ray.remote(num_cpus=0, max_restarts=0)(_NodeRunner)
        for n, schedule in zip(nodes, schedules):
            label, address = n["NodeID"][:12], n.get("NodeManagerAddress")
            actor = runner_cls.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False),
                # every run in flight, the pending reservation, and facts/sweep/close beside them
                max_concurrency=schedule["max_inflight"] + 4,
            ).remote(settings, self.todo, schedule, self.board, (label, address))
            self.actors.append(
                {"actor": actor, "slots": schedule["jobs"], "max_inflight": schedule["max_inflight"],
                 "asking": False, "alive": True, "node": label, "address": address, "runs": 0}
            )  # fmt: skip
        self.log(
            f"ray: {len(self.actors)} nodes, {sum(a['slots'] for a in self.actors)} slots ("
            + ", ".join(f"{a['node']} @ {a['address']}: {a['slots']}" for a in self.actors)
            + ")"
        )

    def node_lost(self, a, exc) -> None:
        if a["alive"]:
            self.log(f"ray: node {a['node']} lost ({type(exc).__name__}); its in-flight runs stay missing")
            if self.board is not None:
                self.board.forget_node.remote(a["node"])  # its claimed test runs go to the next node that asks
        a["alive"] = False

    def dispatch(self) -> None:
        """Until no run is in flight and nothing is left to send: one reservation request per
        node, a cell sent for each reservation granted, each result handed to ``on_result``."""
        while True:
            if self.queue and not self.may_start():
                self.not_started.extend(c.run_id for c in self.queue)
                self.queue.clear()
            for a in self.actors:
                if a["alive"] and self.queue and not a["asking"]:
                    self.pending[a["actor"].admit.remote()] = ("admit", None, a)
                    a["asking"] = True
            if not any(kind == "run" for kind, _, _ in self.pending.values()) and not (self.queue and self.pending):
                break  # no run in flight and nothing to send (or every node is gone: the rest stays missing)
            done, _ = self.ray.wait(list(self.pending), num_returns=1)
            for ref in done:
                kind, cell, a = self.pending.pop(ref)
                if kind == "admit":
                    self._admitted(ref, a)
                else:
                    self._finished(ref, cell, a)
        if self.queue:
            self.lost.extend(c.run_id for c in self.queue)

    def _admitted(self, ref, a) -> None:
        """A node's reservation answered: send it a cell its ready frameworks can run, or
        give the slot back (nothing to send, or the budget is reached)."""
        from claimgrid.execute.admission import next_cell

        a["asking"] = False
        try:
            ready = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the node (or its actor) died
            self.node_lost(a, exc)
            return
        if ready is None:
            return
        if not self.queue or not self.may_start():
            a["actor"].release.remote()
            return
        cell = self.long_first.take(self.queue) or next_cell(self.queue, set(ready).__contains__)
        run_ref = a["actor"].run.remote(cell)
        self.pending[run_ref], self.began[run_ref] = ("run", cell, a), time.monotonic()

    def _finished(self, ref, cell, a) -> None:
        """A run's result: handed to ``on_result`` (the driver stores it), then the node's slot
        released; a node that died with it: the run is lost (missing, for ``--resume``)."""
        try:
            result = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the node (or its actor) died with this run
            self.node_lost(a, exc)
            self.lost.append(cell.run_id)
            self.began.pop(ref, None)
            return
        self.long_first.finished(cell, time.monotonic() - self.began.pop(ref))
        a["runs"] += 1
        self.on_result(cell, result)
        a["actor"].release.remote()  # counted (budget included): the node may admit the next run

    def close(self) -> dict:
        """Each live node's gate figures, its sweep of dead nodes' folders and its close; the
        shared cache's figures; every actor stopped. Returns the execution's facts."""
        ray, swept = self.ray, []
        for a in self.actors:
            if a["alive"]:
                try:
                    a["gate"] = ray.get(a["actor"].facts.remote(), timeout=30)
                    # the folders of nodes killed with their watchdog (this grid's or an earlier one's)
                    swept += ray.get(a["actor"].sweep.remote(), timeout=30)
                    swept += ray.get(a["actor"].close.remote(), timeout=30)
                except Exception:  # noqa: BLE001 - a node dying at the very end changes no record
                    pass
                ray.kill(a["actor"])
        cache = None
        if self.board is not None:
            try:
                cache = ray.get(self.board.facts.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - figures only
                cache = None
            ray.kill(self.board)
        return {
            "backend": "ray",
            "nodes": len(self.actors),
            "per_node": [
                {
                    "node_id": a["node"],
                    "address": a["address"],
                    "slots": a["slots"],
                    "max_inflight": a["max_inflight"],
                    "runs": a["runs"],
                    "alive": a["alive"],
                    **({"scheduler": a["gate"]} if a.get("gate") else {}),
                }
                for a in self.actors
            ],
            "lost": self.lost,
            "not_started": self.not_started,
            "started_early_as_long": self.long_first.promoted,
            "verify_cache": cache,
            "swept": sorted(set(swept)),
            "wall_s": round(time.monotonic() - self.t0, 1),
        }
