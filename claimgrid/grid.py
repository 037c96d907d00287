"""The grid: plan the cells, start the gateway and adapters, run in parallel, write the ledger."""

from __future__ import annotations

import collections
import datetime as dt
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from . import ROOT
from .cells import Cell, plan
from .classifier import RunFacts, classify
from .conditions import load_content_conditions, load_swap_conditions
from .errors import ClaimgridError, UnknownNameError
from .realmodels import (budget_meta, note_unpriced, real_model_options, resume_budget_meta, stop_line,
                         stop_record)
from .reference_truth import BEHAVIOUR, DEFAULT_MODELS, DEFAULT_SUBSTITUTE
from .store import RunStore
from .tasks import load_tasks, select


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return (sha or "unknown") + (" (dirty)" if dirty else "")
    except OSError:
        return "unknown"


def check_models(models: list[str]) -> None:
    """A model is a reference model name or a LiteLLM model string (provider/model)."""
    for m in models:
        if m not in BEHAVIOUR and "/" not in m:
            raise UnknownNameError("model", m, list(BEHAVIOUR) + ["<provider>/<model> (any LiteLLM model string)"])


def _selection(args, tasks, content, swap, venvs) -> dict:
    def pick(values, registry, kind):
        if not values:
            return list(registry)
        select(registry, values, kind)
        return list(values)
    models = args.models or list(DEFAULT_MODELS)
    substitute = args.substitute or DEFAULT_SUBSTITUTE
    check_models(models + [substitute])
    return {
        "frameworks": pick(args.frameworks, venvs, "framework"),
        "tasks": pick(args.tasks, tasks, "task"),
        "content": pick(args.content, content, "content condition"),
        "swap": pick(args.swap, swap, "swap condition"),
        "models": models, "substitute": substitute, "repeats": args.repeats,
    }


def cmd_run(args) -> int:
    from .venvs import ensure_venvs, framework_versions, load_venvs

    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    venvs = load_venvs(args.venvs)
    if args.repeats < 1:
        raise ClaimgridError("--repeats must be at least 1")

    if args.resume:
        store = RunStore(args.resume)
        if not store.meta_path.exists():
            raise ClaimgridError(f"{args.resume}: not a grid folder (no meta.json)")
        meta = store.read_meta()
        sel = meta["selection"]
        store.repair()
        timeout_s, jobs, isolation, max_calls = meta["timeout_s"], args.jobs or meta["jobs"], meta["isolation"], meta["max_model_calls"]
        limits, retry = real_model_options(args, meta)
    else:
        sel = _selection(args, tasks, content, swap, venvs)
        grid_id = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)
        folder = args.out or ROOT / "ledger" / grid_id
        store = RunStore(folder)
        timeout_s, isolation, max_calls = args.timeout, args.isolation, args.max_model_calls
        jobs = args.jobs or os.cpu_count() or 2
        meta = None
        limits, retry = real_model_options(args, None)

    cells = plan(sel["frameworks"], sel["tasks"], sel["content"], sel["swap"], sel["models"],
                 sel["substitute"], sel["repeats"])
    from .gateway import preflight
    preflight(sorted(set(sel["models"] + [sel["substitute"]])))
    entries = {name: venvs[name] for name in sel["frameworks"]}
    ensure_venvs(entries)
    fw_versions = {name: framework_versions(e) for name, e in entries.items()}

    if meta is None:
        meta = {
            "grid_id": store.folder.name, "command": "uv run grid.py " + " ".join(sys.argv[1:]),
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "finished": None,
            "wall_s": None, "claimgrid_commit": _commit(), "python": platform.python_version(),
            "platform": platform.platform(), "frameworks": fw_versions, "models": sel["models"],
            "substitute": sel["substitute"], "tasks": sel["tasks"], "content": sel["content"], "swap": sel["swap"],
            "repeats": sel["repeats"], "timeout_s": timeout_s, "jobs": jobs, "isolation": isolation,
            "max_model_calls": max_calls, "retries": {}, "grid_size": len(cells),
            "reference_models": all(m in BEHAVIOUR for m in sel["models"] + [sel["substitute"]]),
            "selection": sel, "resumed": [],
            **budget_meta(limits, retry),
        }
        store.create(meta)
    else:
        meta.setdefault("resumed", []).append(dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        resume_budget_meta(meta, limits, retry)
        store.write_meta(meta)
    note_unpriced(limits, sel["models"] + [sel["substitute"]])

    done = store.completed_ids()
    todo = [c for c in cells if c.run_id not in done]
    print(f"grid {store.folder}: {len(cells)} cells, {len(done)} already done, {len(todo)} to run, "
          f"{jobs} jobs, isolation {isolation}", flush=True)
    t0 = time.monotonic()
    from .gateway import Gateway
    gateway = Gateway(retry=retry)
    for run_id in done:  # the budget counts what the grid already spent before a resume
        gateway.spend.add_events(store.load_events(run_id))
    if todo:
        _execute(todo, store, tasks, content, swap, entries, fw_versions, timeout_s, max_calls, isolation, jobs,
                 progress=not args.no_progress, meta=meta, gateway=gateway, limits=limits, grid_size=len(cells))
    meta["spend"] = gateway.spend.snapshot()
    meta["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    meta["wall_s"] = round((meta.get("wall_s") or 0) + time.monotonic() - t0, 1)
    store.write_meta(meta)
    code = _finish(store)
    if meta.get("stopped_at_budget"):
        print(stop_line(meta["stopped_at_budget"], store.folder))
    return code


def _finish(store: RunStore) -> int:
    from .ledger import headline_table, render_ledger
    path = render_ledger(store.folder)
    try:
        from rich.console import Console
        Console().print(headline_table(store.folder))
    except Exception as exc:  # the table is a convenience; the ledger is written already
        print(f"(headline table unavailable: {exc})")
    print(f"ledger: {path}")
    return 0


BUDGET_SKIP = "not started: budget reached"


def _execute(todo: list[Cell], store, tasks, content, swap, entries, fw_versions, timeout_s, max_calls,
             isolation, jobs, progress: bool, meta: dict, gateway=None, limits=None, grid_size=None) -> None:
    """Run ``todo``. With ``limits``, no run starts once the gateway's spend reached one:
    runs in flight finish, and ``meta["stopped_at_budget"]`` records the figures."""
    from .gateway import Gateway
    from .launch import Launcher
    from .runner import GridContext

    work_dir = Path(tempfile.mkdtemp(prefix="claimgrid-"))
    gateway = gateway or Gateway()
    gateway.start()
    grid_size = grid_size or len(todo)
    done_before = grid_size - len(todo)

    def budget_reached() -> str | None:
        return gateway.spend.over(limits) if limits is not None and limits.any() else None
    launcher = Launcher(entries, isolation=isolation)
    ctx = GridContext(tasks=tasks, content=content, swap=swap, gateway=gateway, launcher=launcher, store=store,
                      work_dir=work_dir, timeout_s=timeout_s, max_model_calls=max_calls, isolation=isolation,
                      framework_versions=fw_versions)
    for key in {(c.task, c.content) for c in todo}:  # built once, before threads share them
        ctx.template(tasks[key[0]], content[key[1]])
    counts: collections.Counter = collections.Counter()
    reporter = _Progress(len(todo), enabled=progress,
                         extra=lambda done: "spend " + gateway.spend.line(done_before + done, grid_size))
    not_started: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            pending = {}
            queue = list(todo)
            while queue or pending:
                if queue and budget_reached():
                    not_started += [c.run_id for c in queue]
                    queue.clear()
                while queue and len(pending) < jobs * 2:
                    cell = queue.pop(0)
                    pending[pool.submit(_safe_run, cell, ctx, budget_reached)] = cell
                if not pending:
                    break
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    cell = pending.pop(fut)
                    record, error = fut.result()
                    if error == BUDGET_SKIP:
                        not_started.append(cell.run_id)
                        continue
                    if record:
                        counts[record["classification"]["outcome"]] += 1
                        fw = record["framework"]
                        if record.get("runtime_versions") and fw not in meta["retries"]:
                            meta["retries"][fw] = record["runtime_versions"]
                    else:
                        counts["harness error"] += 1
                        reporter.log(f"harness error in {cell.run_id}: {error}")
                    reporter.advance(counts)
    finally:
        reporter.close()
        launcher.close()
        gateway.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    reason = budget_reached()
    if not_started and reason:
        meta["stopped_at_budget"] = stop_record(reason, limits, gateway.spend, grid_size - len(not_started),
                                                len(not_started))


def _safe_run(cell, ctx, stop=None):
    """A bug in the harness for one cell must not stop the grid; it is reported, and the cell stays missing.

    ``stop()`` is asked when the run would start: a queued run does not start once the
    budget is reached (returns ``(None, BUDGET_SKIP)``)."""
    from .runner import run_cell
    if stop is not None and stop():
        return None, BUDGET_SKIP
    try:
        return run_cell(cell, ctx), None
    except Exception as exc:  # noqa: BLE001 - reported to the user; the cell can be resumed
        return None, f"{type(exc).__name__}: {exc}"


class _Progress:
    """A rich progress bar (runs done, runs/s, elapsed, remaining, outcomes so far) or plain lines."""

    def __init__(self, total: int, enabled: bool, extra=None):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.extra = extra  # done -> text appended to the line (spend so far and its projection)
        self.enabled = enabled and sys.stdout.isatty()
        self.bar = None
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self.bar = Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[rate]} runs/s"), TimeElapsedColumn(),
                                TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[outcomes]}"),
                                TextColumn("{task.fields[spend]}"))
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


def cmd_reclassify(args) -> int:
    """Re-derive every classification from the stored evidence; nothing is re-run."""
    store = RunStore(args.dir)
    if not store.runs_path.exists():
        raise ClaimgridError(f"{args.dir}: not a grid folder (no runs.jsonl)")
    records = store.records()
    changed = 0
    for rec in records:
        facts = RunFacts(**rec["facts"])
        new = classify(store.load_events(rec["run_id"]), facts)
        if new != rec["classification"]:
            changed += 1
        rec["classification"] = new
    store.rewrite(records)
    print(f"reclassified {len(records)} runs from stored evidence; {changed} changed")
    return _finish(store)
