"""A node: everything one machine needs to run cells — its own gateway on loopback, its own
warm parents, its own work folder, its own verify cache (``claimgrid.verify.cache``, in memory,
empty at start) — behind ``run(cell)``.

The local backend opens one node in the driver; the Ray backend opens one per Ray node
inside an actor (``claimgrid/execute/ray.py``). Either way the node never writes the
ledger: ``run`` returns the record and the evidence files, and the driver, the single
writer, stores them. Run tokens and the gateway never leave the node.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from claimgrid.execute.cells import Cell

if TYPE_CHECKING:
    from claimgrid.gateway import Gateway


@dataclass(frozen=True)
class NodeSettings:
    """What a node needs to run cells of one grid: plain, picklable values (paths, not objects)."""

    tasks_dir: str
    conditions_dir: str
    venvs: str
    frameworks: tuple[str, ...]
    timeout_s: float
    max_model_calls: int
    isolation: str
    framework_versions: dict = field(default_factory=dict)
    guard_mode: str = "auto"  # a remote node detects its own guard with this mode
    policies: tuple[str, ...] = ()  # --policies files every node loads into its registry
    retry: dict | None = None  # RetryPolicy fields for real providers (None: the defaults)
    replay_dir: str | None = None  # grid.py replay: serve this ledger's recorded exchanges
    delegations: dict = field(default_factory=dict)  # grid.py replay: run_id -> recorded delegation id
    connections: tuple | None = None  # (default, {provider: n}): --max-connections for the gateway
    verify_cache: bool = True  # False: --no-verify-cache (every run's tests are re-run)


class CollectingStore:
    """Stands in for the run store inside a node: keeps what ``run_cell`` would write."""

    def __init__(self):
        self.evidence: dict[str, dict] = {}
        self.records: dict[str, dict] = {}

    def write_evidence(self, run_id: str, files: dict) -> None:
        self.evidence[run_id] = files

    def append(self, record: dict) -> None:
        self.records[record["run_id"]] = record

    def take(self, run_id: str) -> tuple[dict | None, dict | None]:
        return self.records.pop(run_id, None), self.evidence.pop(run_id, None)


class Node:
    """One node's gateway, launcher and grid context. ``close`` stops them (idempotent)."""

    def __init__(self, settings: NodeSettings, tasks=None, content=None, swap=None, entries=None, guard=None):
        from claimgrid.execute.runner import GridContext
        from claimgrid.gateway import Gateway
        from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
        from claimgrid.inputs.tasks import ensure_task_envs, load_tasks
        from claimgrid.inputs.venvs import ensure_venvs, load_venvs
        from claimgrid.launch import Launcher
        from claimgrid.reference.registry import load_policies
        from claimgrid.sandbox.guard import detect
        from claimgrid.verify.cache import VerifyCache

        self.settings = settings
        tasks = tasks if tasks is not None else load_tasks(Path(settings.tasks_dir))
        content = content if content is not None else load_content_conditions(Path(settings.conditions_dir))
        swap = swap if swap is not None else load_swap_conditions(Path(settings.conditions_dir))
        if entries is None:  # a remote node: its own venvs, task envs, policies and guard
            venvs = load_venvs(Path(settings.venvs))
            entries = {name: venvs[name] for name in settings.frameworks}
            ensure_venvs(entries)  # a no-op stamp check where they are built already
            ensure_task_envs(tasks.values())
            for path in settings.policies:
                load_policies(path)
        self.guard = guard if guard is not None else detect(settings.guard_mode)
        self.sink = CollectingStore()
        self.work_dir = Path(tempfile.mkdtemp(prefix="claimgrid-"))
        self.gateway: Gateway | None = None
        self.gateway_cpu_s: float | None = None  # set by close(): the gateway thread's CPU
        self.launcher = Launcher(entries, isolation=settings.isolation)
        self.launcher.watch_dir(self.work_dir)  # removed by the watchdog if this process is killed
        self.launcher.prewarm()  # preloads start now, a few at a time, overlapping the first runs
        self._closed = False
        try:
            from claimgrid.gateway.connections import Connections
            from claimgrid.gateway.recorded import ReplaySource
            from claimgrid.gateway.retry import RetryPolicy

            self.connections = Connections(*settings.connections) if settings.connections else Connections()
            self.gateway = Gateway(
                retry=RetryPolicy(**settings.retry) if settings.retry else None,
                replay=ReplaySource(Path(settings.replay_dir)) if settings.replay_dir else None,
                connections=self.connections,
            )
            self.gateway.start()
            self.ctx = GridContext(
                tasks=tasks,
                content=content,
                swap=swap,
                gateway=self.gateway,
                launcher=self.launcher,
                store=self.sink,
                work_dir=self.work_dir,
                timeout_s=settings.timeout_s,
                max_model_calls=settings.max_model_calls,
                isolation=settings.isolation,
                framework_versions=settings.framework_versions,
                guard=self.guard,
                delegations=dict(settings.delegations),
                verify_cache=VerifyCache() if settings.verify_cache else None,
            )
        except BaseException:
            self.close()
            raise

    def prepare(self, cells: list[Cell]) -> None:
        """Build the templates these cells need once, before threads share them."""
        for task, content in sorted({(c.task, c.content) for c in cells}):
            self.ctx.template(self.ctx.tasks[task], self.ctx.content[content])

    def run(self, cell: Cell) -> tuple[dict | None, dict | None, str | None]:
        """``(record, evidence files, None)``, or ``(None, None, error)`` for a harness bug in
        this cell (reported by the driver; the cell stays missing and ``--resume`` re-runs it);
        error ``"interrupted"`` when Ctrl-C killed the run (nothing of it is stored)."""
        from claimgrid.execute.runner import run_cell
        from claimgrid.launch import RunInterrupted

        try:
            run_cell(cell, self.ctx)
        except RunInterrupted:
            self.sink.take(cell.run_id)
            return None, None, "interrupted"
        except Exception as exc:  # noqa: BLE001 - one cell's harness bug must not stop the grid
            self.sink.take(cell.run_id)
            return None, None, f"{type(exc).__name__}: {exc}"
        record, files = self.sink.take(cell.run_id)
        return record, files, None

    def interrupt(self) -> None:
        """Ctrl-C: kill every in-flight adapter now (their cells end as ``interrupted``)."""
        self.launcher.interrupt()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.launcher.close()
        if self.gateway is not None:
            self.gateway_cpu_s = self.gateway.thread_cpu_s()
            self.gateway.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)
