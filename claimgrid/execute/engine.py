"""The engine: ``execute`` runs a grid's cells on a backend and hands every finished run to the store (the single writer)."""

from __future__ import annotations

import collections
import errno
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from claimgrid.execute.cells import Cell
from claimgrid.execute.spec import CellResult, CellStatus, GridInputs, GridReport, GridSpec, Replay, RunSettings
from claimgrid.execute.spending import stop_record
from claimgrid.store import EVENTS_NAME, RunStore

# A store write that fails for one of these stops the grid: every later run would fail the
# same way and be lost. ENOSPC/EDQUOT/EROFS stop it wherever they occur; EACCES/EPERM only
# under the ledger folder, since elsewhere they can be a single cell's problem.
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


_DENIED = {errno.EACCES, errno.EPERM}
# The longest the driver's main thread sleeps between looks at its runs (Ctrl-C reaction time).
SIGNAL_POLL_S = 0.2


def _is_storage_error(exc: BaseException | None, store: RunStore) -> bool:
    if not isinstance(exc, OSError):
        return False
    if exc.errno in _FULL:
        return True
    if exc.errno in _DENIED and exc.filename:
        try:
            return Path(exc.filename).resolve().is_relative_to(store.folder.resolve())
        except (OSError, ValueError):
            return False
    return False


def execute(
    cells: list[Cell],
    store: RunStore,
    spec: GridSpec,
    settings: RunSettings,
    inputs: GridInputs,
    replay: Replay | None = None,
) -> GridReport:
    """Run the cells of ``cells`` that ``store`` has no record of yet, on the backend of
    ``settings``; the driver writes every finished run (single writer): evidence folder first,
    then its ``runs.jsonl`` line. Returns what happened (:class:`GridReport`); ``meta.json``
    is the caller's to write.

    A storage error writing a run (disk full, read-only, permission) stops the grid: no new
    cell starts, the runs in flight finish, and ``report.storage_error`` says which.
    Budget: every run's gateway exchanges add to the grid's spend (claimgrid.gateway.budget),
    the runs already in ``store`` included; with ``spec.budget`` limits, no run starts once a
    limit is reached: runs in flight finish, and ``report.stopped_at_budget`` has the figures.
    ``replay`` serves a ledger's recordings instead of the models. ``settings.schedule``
    (claimgrid.execute.admission.Schedule): how many runs use CPU and how many are in flight;
    cells start in ``admission.spread`` order.

    Ctrl-C (KeyboardInterrupt) kills every in-flight adapter at once, cancels the queued
    cells, stores nothing of the interrupted runs and re-raises: the ledger holds only
    complete runs, and ``--resume`` runs the rest."""
    from claimgrid.gateway.budget import Spend

    done = store.completed_ids()
    todo = [c for c in cells if c.run_id not in done]
    spend = Spend()
    for run_id in done:  # the budget counts what the grid already spent before a resume
        spend.add_events(store.load_events(run_id))
    report = (
        _Grid(store, spec, settings, inputs, spend, len(todo), len(cells)).run(todo, replay) if todo else GridReport()
    )
    report.spend = spend.snapshot()
    return report


class _Grid:
    """One ``execute``: the spend, the budget gate, the progress line and the single writer."""

    def __init__(self, store, spec: GridSpec, settings: RunSettings, inputs: GridInputs, spend, todo: int, grid_size):
        self.store, self.spec, self.settings, self.inputs = store, spec, settings, inputs
        self.spend, self.report, self.grid_size = spend, GridReport(), grid_size
        self.limits = spec.budget.limits()
        self.live: list = []  # local backend: the node's gateway keeps the running total as calls happen
        self.not_started: list[str] = []
        self.stopped: list[OSError] = []
        self.counts: collections.Counter = collections.Counter()
        self.false_successes = 0  # runs so far that claimed success the verifier did not confirm
        done_before = grid_size - todo
        self.reporter = _Progress(
            todo,
            enabled=settings.progress,
            extra=lambda done: "spend " + self.current().line(done_before + done, grid_size) + self.venv_status(),
        )

    def venv_status(self) -> str:
        builds = self.inputs.builds
        return "" if builds is None or builds.done() else f"  venvs: {builds.summary()}"

    def current(self):
        return self.live[0] if self.live else self.spend

    def budget_reached(self) -> str | None:
        return self.current().over(self.limits) if self.limits.any() else None

    def on_result(self, cell: Cell, result: CellResult) -> None:
        """A finished cell, in the driver: stored (evidence first), or counted as not stored.
        The record comes whole from its node (where it ran included): stored as it is."""
        if result.status is CellStatus.NOT_STARTED:
            self.not_started.append(cell.run_id)
            return
        if result.status is CellStatus.DONE and self.stopped:
            return  # the ledger cannot be written: the cell stays missing for --resume
        if result.status is CellStatus.DONE:
            assert result.record is not None, "a DONE cell carries its record (CellResult.done)"
            record, files = result.record, result.files or {}
            try:
                self.store.write_evidence(cell.run_id, files)  # evidence first: a line always has its folder
                self.store.append(record)
            except OSError as exc:
                if not _is_storage_error(exc, self.store):
                    raise
                self.stopped.append(exc)
                self.reporter.log(f"cannot write {cell.run_id}: {exc.strerror}; stopping the grid")
                return
            if not self.live:  # another backend: totals from each finished run's exchanges
                self.spend.add_events(files.get(EVENTS_NAME) or [])
            self.counts[record.classification.outcome] += 1
            if record.classification.claim_vs_outcome == "FALSE_SUCCESS":
                self.false_successes += 1
            fw = record.framework
            if record.runtime_versions and fw not in self.report.retries:
                self.report.retries[fw] = record.runtime_versions
        elif result.status is CellStatus.HARNESS_ERROR:
            self.counts["harness error"] += 1
            # recorded in meta.json (the cell stays missing: --resume re-runs it)
            self.report.harness_errors.append({"run_id": cell.run_id, "error": result.error})
            self.reporter.log(f"HARNESS ERROR in {cell.run_id}: {result.error}")
        self.reporter.advance(self.counts, self.false_successes)

    def gated(self, node, cell: Cell) -> CellResult:
        # Asked when the run would start: a queued run does not start once the budget is reached.
        if self.budget_reached():
            return CellResult.not_started()
        return node.run(cell)

    def run(self, todo: list[Cell], replay: Replay | None) -> GridReport:
        from claimgrid.execute.node import NodeSettings

        node_settings = NodeSettings(
            spec=self.spec,
            framework_versions=self.inputs.framework_versions,
            connections=(self.settings.connections_default, dict(self.settings.connections)),
            replay=replay,
            claim_judge=self.settings.claim_judge,
        )
        try:
            if self.settings.backend == "ray":
                self._run_ray(todo, node_settings)
            else:
                self._run_local(todo, node_settings)
        finally:
            self.reporter.close()
        self.report.storage_error = self.stopped[0] if self.stopped else None
        return self.report

    def _run_ray(self, todo: list[Cell], node_settings) -> None:
        from claimgrid.execute import ray as ray_backend
        from claimgrid.execute.admission import provider_connections

        # The budget is the driver's: every finished run's exchanges add to the grid's spend
        # (on_result), and no node is sent another cell once a limit is reached.
        plan = {
            "address": self.settings.address,
            "jobs": self.settings.node_jobs,
            "max_inflight": self.settings.node_max_inflight,
            "connections": provider_connections(
                self.spec.selection.all_models, self.settings.connections_default, dict(self.settings.connections)
            ),
            "may_start": lambda: not self.budget_reached(),
        }
        facts = ray_backend.execute(todo, node_settings, plan, self.on_result, self.reporter.log)
        self.report.executions.append(facts)
        self.not_started += facts["not_started"]
        reason = self.budget_reached()
        if self.not_started and reason:
            self.report.stopped_at_budget = stop_record(
                reason, self.limits, self.current(), self.grid_size - len(self.not_started), len(self.not_started)
            )
        if facts["lost"]:
            self.reporter.log(
                f"{len(facts['lost'])} runs were lost with their node; "
                f"`grid.py run --resume {self.store.folder}` runs them"
            )
        self.report.lost = len(facts["lost"])

    def _run_local(self, todo: list[Cell], node_settings) -> None:
        from claimgrid.execute.admission import POLL_S, Admission, LongFirst, next_cell, spread
        from claimgrid.execute.node import Node

        node = pool = None
        try:
            node = Node(node_settings, self.inputs)
            node.prepare(todo)  # templates built once, before threads share them
            assert node.gateway is not None, "a node's gateway starts with the node"
            node.gateway.spend.merge(self.spend)  # what the grid spent before (a resume) counts too
            self.live.append(node.gateway.spend)
            schedule = self.settings.schedule
            gate = Admission(schedule.jobs, schedule.max_inflight, node.launcher.running_pids)
            pool = ThreadPoolExecutor(max_workers=schedule.max_inflight)
            pending: dict = {}
            venvs = _VenvGate(self.inputs.builds, todo, node.launcher, self.reporter)
            queue = collections.deque(spread(venvs.startable, key=lambda c: c.model))
            long_first = LongFirst()
            began: dict = {}  # future -> when its run was handed to the pool
            while (queue and not self.stopped) or pending or (venvs.held and not self.stopped):
                if venvs.held:  # cells whose venv just built join the queue; a failed build's are not started
                    more = venvs.poll(self.report.venv_failures)
                    if more:
                        queue = collections.deque(spread([*queue, *more], key=lambda c: c.model))
                if (queue or venvs.held) and self.budget_reached():
                    self.not_started += [c.run_id for c in queue] + venvs.release()
                    queue.clear()
                while queue and not self.stopped and gate.may_start(len(pending)):
                    gate.started(len(pending))
                    cell = long_first.take(queue) or next_cell(queue, node.launcher.ready)
                    fut = pool.submit(self.gated, node, cell)
                    pending[fut], began[fut] = cell, time.monotonic()
                if not pending:
                    if venvs.held and not queue and not self.stopped:
                        venvs.wait(SIGNAL_POLL_S)  # nothing runs until another venv is ready
                        continue
                    break
                # With work queued, wake to re-read which runs are idle. Never wait unbounded:
                # a Ctrl-C delivered to a worker thread (blocked in a test run's wait) runs its
                # handler only when this thread next wakes.
                timeout = POLL_S if queue and not self.stopped else SIGNAL_POLL_S
                finished, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
                for fut in finished:
                    cell = pending.pop(fut)
                    long_first.finished(cell, time.monotonic() - began.pop(fut))
                    self.on_result(cell, fut.result())
            self.report.scheduler = {**gate.facts(), "started_early_as_long": long_first.promoted}
            venvs.release()  # a storage stop left them: missing, so --resume runs them
            self.report.venv_builds = venvs.facts()
            reason = self.budget_reached()
            if self.not_started and reason:
                self.report.stopped_at_budget = stop_record(
                    reason, self.limits, self.current(), self.grid_size - len(self.not_started), len(self.not_started)
                )
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
            if node is not None:
                node.interrupt()
            print(
                f"interrupted: in-flight runs killed; finish with: uv run grid.py run --resume {self.store.folder}",
                flush=True,
            )
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            if self.live:
                self.spend.copy_from(self.live[0])
            if node is not None:
                node.close()
                self.report.gateway_cpu_s = node.gateway_cpu_s


class _VenvGate:
    """The local backend's hold on cells whose framework venv is still building
    (``GridInputs.builds``, claimgrid.inputs.venvs.Builds; None: every venv is built).

    ``startable``: the cells whose venv is ready now. ``poll`` moves the cells of each venv
    that became ready since to the caller (and has the launcher preload its warm parent);
    the cells of a venv whose build failed are not started: one line naming the framework and
    its error goes to the progress output, ``{"framework", "error", "runs_not_started"}`` to
    ``failures`` (the cells stay missing: ``--resume`` runs them). Each state change is one
    progress line, so the output shows which venvs are building and which frameworks run."""

    def __init__(self, builds, todo: list[Cell], launcher, reporter):
        self.builds, self.launcher, self.reporter = builds, launcher, reporter
        self.held: dict[str, list[Cell]] = {}
        self.startable: list[Cell] = []
        for cell in todo:
            if builds is None or builds.state(cell.framework) == "ready":
                self.startable.append(cell)
            else:
                self.held.setdefault(cell.framework, []).append(cell)
        if builds is not None:
            builds.changes()  # the states so far are in the line below
            running = sorted({c.framework for c in self.startable})
            for name in running:  # ready since the node started its preloads: preloaded too
                launcher.prewarm_more(name)
            if self.held:
                reporter.log(
                    f"venvs: {builds.summary()}; running {', '.join(running) or 'none yet'} "
                    f"(each framework's runs start once its venv is built)"
                )

    def poll(self, failures: list[dict]) -> list[Cell]:
        if self.builds is None:
            return []
        for name, state in self.builds.changes():  # only for the lines: the states are read below
            if state == "building" and name in self.held:
                self.reporter.log(f"venv {name}: building ({self.builds.summary()})")
        more: list[Cell] = []
        for name in list(self.held):
            state = self.builds.state(name)
            if state == "ready":
                cells = self.held.pop(name)
                self.launcher.prewarm_more(name)
                st = self.builds.states[name]
                took = f" in {(st.ended_unix or 0) - (st.started_unix or 0):.1f} s" if st.built else ""
                self.reporter.log(f"venv {name}: ready{took}; its {len(cells)} runs start ({self.builds.summary()})")
                more += cells
            elif state == "failed":
                cells = self.held.pop(name)
                error = self.builds.error(name) or f"venvs: framework '{name}' failed to install"
                failures.append({"framework": name, "error": error, "runs_not_started": len(cells)})
                self.reporter.total -= len(cells)  # the progress counts the runs that will run
                self.reporter.log(f"{error}; its {len(cells)} runs not started (the other frameworks' runs go on)")
        return more

    def wait(self, timeout: float) -> None:
        if self.builds is not None:
            self.builds.wait(timeout)

    def release(self) -> list[str]:
        """The run ids still held (the grid stops starting runs), no longer held."""
        out = [c.run_id for cells in self.held.values() for c in cells]
        self.held.clear()
        return out

    def facts(self) -> dict | None:
        return None if self.builds is None else self.builds.facts()


def eta(left: int, rate: float) -> str:
    """Time left at ``rate`` runs/s, as 1h02m, 3m05s or 12s."""
    if left <= 0:
        return "0s"
    s = int(round(left / max(rate, 1e-9)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"


class _Progress:
    """A rich progress bar (runs done, runs/s, elapsed, remaining, outcomes so far) or plain lines."""

    def __init__(self, total: int, enabled: bool, extra=None):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.extra = extra  # done -> text appended to the line (spend so far and its projection)
        self.enabled = enabled and sys.stdout.isatty()
        self.bar = None
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]runs"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]} runs/s"),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                TextColumn("false success {task.fields[false]}"),
                TextColumn("{task.fields[outcomes]}"),
                TextColumn("{task.fields[spend]}"),
            )
            self.bar.start()
            self.task = self.bar.add_task("grid", total=total, rate="0.0", outcomes="", spend="", false=0)

    def advance(self, counts, false_successes: int = 0) -> None:
        self.done += 1
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / elapsed
        outcomes = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
        spend = self.extra(self.done) if self.extra else ""
        if self.bar:
            self.bar.update(
                self.task, advance=1, rate=f"{rate:.1f}", outcomes=outcomes, spend=spend, false=false_successes
            )
        elif self.done == self.total or self.done % max(1, self.total // 20) == 0:
            print(
                f"[{self.done}/{self.total} runs] {rate:.1f} runs/s  ETA {eta(self.total - self.done, rate)}  "
                f"false success {false_successes}  {outcomes}  {spend}".rstrip(),
                flush=True,
            )

    def log(self, text: str) -> None:
        (self.bar.console.print if self.bar else print)(text)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
