"""The engine: run a list of cells on a backend and hand every finished run to the store (the single writer)."""

from __future__ import annotations

import collections
import errno
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.execute.cells import Cell
from claimgrid.execute.spending import (
    stop_record,
)
from claimgrid.store import RunStore

# A store write that fails for one of these stops the grid: every later run would fail the
# same way and be lost. ENOSPC/EDQUOT/EROFS stop it wherever they occur; EACCES/EPERM only
# under the ledger folder, since elsewhere they can be a single cell's problem.
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


_DENIED = {errno.EACCES, errno.EPERM}


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


BUDGET_SKIP = "not started: budget reached"


def _execute(
    todo: list[Cell],
    store,
    tasks,
    content,
    swap,
    entries,
    fw_versions,
    timeout_s,
    max_calls,
    isolation,
    schedule,
    progress: bool,
    meta: dict,
    guard=None,
    args=None,
    stopped=None,
    spend=None,
    limits=None,
    retry=None,
    replay_dir=None,
    grid_size=None,
    delegations=None,
) -> int:
    """Run ``todo`` on the chosen backend; the driver writes every finished run (single writer):
    evidence folder first, then its ``runs.jsonl`` line. Returns how many runs were lost with
    a node (always 0 on the local backend).

    A storage error writing a run (disk full, read-only, permission) is appended to
    ``stopped``: no new cell starts, the runs in flight finish, and the caller reports it.
    Budget: every finished run's gateway exchanges add to ``spend`` (claimgrid.gateway.budget);
    with ``limits``, no run starts once a limit is reached: runs in flight finish, and
    ``meta["stopped_at_budget"]`` records the figures. ``retry`` (RetryPolicy) and
    ``replay_dir`` (serve a ledger's recordings) configure every node's gateway.
    ``schedule`` (claimgrid.execute.admission.Schedule): how many runs
    use CPU and how many are in flight; cells start in ``admission.spread`` order.

    Ctrl-C (KeyboardInterrupt) kills every in-flight adapter at once, cancels the queued
    cells, stores nothing of the interrupted runs and re-raises: the ledger holds only
    complete runs, and ``--resume`` runs the rest."""
    from claimgrid.execute.admission import POLL_S, Admission, next_cell, spread
    from claimgrid.execute.node import Node, NodeSettings
    from claimgrid.gateway.budget import Spend

    settings = NodeSettings(
        tasks_dir=str(args.tasks_dir if args else ROOT / "tasks"),
        conditions_dir=str(args.conditions_dir if args else ROOT / "conditions"),
        venvs=str(args.venvs if args else ROOT / "venvs.toml"),
        frameworks=tuple(entries),
        timeout_s=timeout_s,
        max_model_calls=max_calls,
        isolation=isolation,
        framework_versions=fw_versions,
        guard_mode=getattr(args, "guard", "auto") if args else "auto",
        policies=tuple(meta.get("policies") or ()),
        retry=retry.as_dict() if retry is not None else None,
        replay_dir=str(replay_dir) if replay_dir else None,
        delegations=dict(delegations or {}),
        connections=(schedule.connections_default, dict(schedule.connections)),
        verify_cache=not getattr(args, "no_verify_cache", False),
    )
    spend = spend if spend is not None else Spend()
    grid_size = grid_size or len(todo)
    done_before = grid_size - len(todo)
    not_started: list[str] = []

    live: list = []  # local backend: the node's gateway keeps the running total as calls happen

    def current():
        return live[0] if live else spend

    def budget_reached() -> str | None:
        return current().over(limits) if limits is not None and limits.any() else None

    counts: collections.Counter = collections.Counter()
    reporter = _Progress(
        len(todo), enabled=progress, extra=lambda done: "spend " + current().line(done_before + done, grid_size)
    )

    stopped = [] if stopped is None else stopped

    def on_result(cell, record, files, error):
        if error == BUDGET_SKIP:
            not_started.append(cell.run_id)
            return
        if record is not None and stopped:
            return  # the ledger cannot be written: the cell stays missing for --resume
        if record is not None:
            try:
                store.write_evidence(cell.run_id, files)  # evidence first: a line always has its folder
                store.append(record)
            except OSError as exc:
                if not _is_storage_error(exc, store):
                    raise
                stopped.append(exc)
                reporter.log(f"cannot write {cell.run_id}: {exc.strerror}; stopping the grid")
                return
            if not live:  # another backend: totals from each finished run's exchanges
                spend.add_events((files or {}).get("events.jsonl") or [])
            counts[record["classification"]["outcome"]] += 1
            fw = record["framework"]
            if record.get("runtime_versions") and fw not in meta["retries"]:
                meta["retries"][fw] = record["runtime_versions"]
        elif error != "interrupted":
            counts["harness error"] += 1
            # recorded in meta.json (the cell stays missing: --resume re-runs it)
            meta.setdefault("harness_errors", []).append({"run_id": cell.run_id, "error": error})
            reporter.log(f"HARNESS ERROR in {cell.run_id}: {error}")
        reporter.advance(counts)

    def gated(node, cell):
        # Asked when the run would start: a queued run does not start once the budget is reached.
        if budget_reached():
            return None, None, BUDGET_SKIP
        return node.run(cell)

    backend = getattr(args, "backend", "local") if args else "local"
    node = pool = None
    try:
        if backend == "ray":
            if limits is not None and limits.any():
                raise ClaimgridError("--max-cost / --max-tokens: not supported with --backend ray yet")
            from claimgrid.execute import ray as ray_backend

            facts = ray_backend.execute(
                todo, settings, getattr(args, "address", None), args.jobs, on_result, reporter.log
            )
            meta.setdefault("executions", []).append(facts)
            if facts["lost"]:
                reporter.log(
                    f"{len(facts['lost'])} runs were lost with their node; "
                    f"`grid.py run --resume {store.folder}` runs them"
                )
            return len(facts["lost"])
        node = Node(settings, tasks=tasks, content=content, swap=swap, entries=entries, guard=guard)
        node.prepare(todo)  # templates built once, before threads share them
        assert node.gateway is not None  # a Node starts its gateway or raises
        node.gateway.spend.merge(spend)  # what the grid spent before (a resume) counts too
        live.append(node.gateway.spend)
        gate = Admission(schedule.jobs, schedule.max_inflight, node.launcher.running_pids)
        pool = ThreadPoolExecutor(max_workers=schedule.max_inflight)
        pending: dict = {}
        queue = collections.deque(spread(todo, key=lambda c: c.model))
        while (queue and not stopped) or pending:
            if queue and budget_reached():
                not_started += [c.run_id for c in queue]
                queue.clear()
            while queue and not stopped and gate.may_start(len(pending)):
                gate.started(len(pending))
                cell = next_cell(queue, node.launcher.ready)
                pending[pool.submit(gated, node, cell)] = cell
            if not pending:
                break
            # With work queued, wake to re-read which runs are idle; else only on a finish.
            finished, _ = wait(pending, timeout=POLL_S if queue and not stopped else None, return_when=FIRST_COMPLETED)
            for fut in finished:
                on_result(pending.pop(fut), *fut.result())
        meta["scheduler"] = gate.facts()
        reason = budget_reached()
        if not_started and reason:
            meta["stopped_at_budget"] = stop_record(
                reason, limits, current(), grid_size - len(not_started), len(not_started)
            )
        return 0
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        if node is not None:
            node.interrupt()
        print(
            f"interrupted: in-flight runs killed; finish with: uv run grid.py run --resume {store.folder}", flush=True
        )
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        reporter.close()
        if live:
            spend.copy_from(live[0])
        if node is not None:
            node.close()
            if node.gateway_cpu_s is not None:
                cpu = meta.setdefault("cpu", {})
                cpu["gateway_thread_s"] = round(cpu.get("gateway_thread_s", 0) + node.gateway_cpu_s, 3)


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
                TextColumn("{task.fields[outcomes]}"),
                TextColumn("{task.fields[spend]}"),
            )
            self.bar.start()
            self.task = self.bar.add_task("grid", total=total, rate="0.0", outcomes="", spend="")

    def advance(self, counts) -> None:
        self.done += 1
        rate = self.done / max(time.monotonic() - self.t0, 1e-9)
        outcomes = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
        spend = self.extra(self.done) if self.extra else ""
        if self.bar:
            self.bar.update(self.task, advance=1, rate=f"{rate:.1f}", outcomes=outcomes, spend=spend)
        elif self.done == self.total or self.done % max(1, self.total // 20) == 0:
            print(f"[{self.done}/{self.total}] {rate:.1f} runs/s  {outcomes}  {spend}".rstrip(), flush=True)

    def log(self, text: str) -> None:
        (self.bar.console.print if self.bar else print)(text)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
