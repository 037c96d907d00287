"""The grid: plan the cells, start the gateway and adapters, run in parallel, write the ledger."""

from __future__ import annotations

import collections
import datetime as dt
import errno
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
from . import validate as V
from .errors import Interrupted, StorageError, UnknownNameError
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


def _with_defaults(args) -> None:
    """Fill the grid-defining flags left out (they parse to None so --resume can tell)."""
    for dest, default in (("repeats", V.DEFAULT_REPEATS), ("timeout", V.DEFAULT_TIMEOUT_S),
                          ("isolation", V.DEFAULT_ISOLATION), ("max_model_calls", V.DEFAULT_MAX_MODEL_CALLS)):
        if getattr(args, dest, None) is None:
            setattr(args, dest, default)


def _storage(store: RunStore, exc: OSError, doing: str) -> StorageError:
    return StorageError(f"--out {store.folder}: {doing} failed: {exc.strerror or exc} "
                        f"(errno {exc.errno}); free space or fix permissions, then "
                        f"`grid.py run --resume {store.folder}`")


def cmd_run(args) -> int:
    """Validate everything (flags, data, a resumed folder), then run; nothing is written before."""
    from .venvs import ensure_venvs, framework_versions, load_venvs

    V.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    venvs = load_venvs(args.venvs)

    if args.resume:
        meta = V.read_meta(args.resume)
        V.check_resume(args, meta, args.resume)
        V.check_stored_names(meta, args.resume / "meta.json", {
            "frameworks": venvs, "tasks": tasks, "content": content, "swap": swap})
        sel = meta["selection"]
        check_models(sel["models"] + [sel["substitute"]])
        V.check_records(args.resume)  # what is kept must be readable: the ledger is rendered from it
        store = RunStore(args.resume)
        timeout_s, jobs, isolation, max_calls = meta["timeout_s"], args.jobs or meta["jobs"], meta["isolation"], meta["max_model_calls"]
    else:
        _with_defaults(args)
        sel = _selection(args, tasks, content, swap, venvs)
        V.check_grid_size(sel)
        grid_id = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)
        folder = args.out or ROOT / "ledger" / grid_id
        V.check_out(folder)
        store = RunStore(folder)
        timeout_s, isolation, max_calls = args.timeout, args.isolation, args.max_model_calls
        jobs = args.jobs or os.cpu_count() or 2
        meta = None

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
        }
        try:
            store.create(meta)
        except OSError as exc:
            # A folder that create() made is removed again: nothing half-written.
            if store.folder.is_dir() and not store.folder.is_symlink():
                shutil.rmtree(store.folder, ignore_errors=True)
            raise StorageError(f"--out {store.folder}: cannot create the ledger folder ({exc.strerror or exc}); "
                               "nothing was written") from None
    else:
        try:
            store.repair()
            meta.setdefault("resumed", []).append(dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
            store.write_meta(meta)
        except OSError as exc:
            raise _storage(store, exc, "preparing the resume") from None

    done = store.completed_ids()
    todo = [c for c in cells if c.run_id not in done]
    print(f"grid {store.folder}: {len(cells)} cells, {len(done)} already done, {len(todo)} to run, "
          f"{jobs} jobs, isolation {isolation}", flush=True)
    t0 = time.monotonic()
    stopped = None
    if todo:
        try:
            stopped = _execute(todo, store, tasks, content, swap, entries, fw_versions, timeout_s, max_calls,
                               isolation, jobs, progress=not args.no_progress, meta=meta)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: {len(store.completed_ids())} of {len(cells)} runs recorded in "
                              f"{store.folder}; `grid.py run --resume {store.folder}` finishes the grid") from None
    try:
        if stopped is None:
            meta["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        meta["wall_s"] = round((meta.get("wall_s") or 0) + time.monotonic() - t0, 1)
        store.write_meta(meta)
    except OSError as exc:
        stopped = stopped or exc
    if stopped is not None:
        recorded = len(store.completed_ids())
        raise StorageError(f"--out {store.folder}: writing the ledger failed: {stopped.strerror or stopped} "
                           f"(errno {stopped.errno}); the grid stopped with {recorded} of {len(cells)} runs "
                           f"recorded; free space or fix permissions, then `grid.py run --resume {store.folder}`")
    try:
        _finish(store)
    except OSError as exc:
        raise _storage(store, exc, "rendering the ledger") from None
    missing = len(cells) - len(store.completed_ids() & {c.run_id for c in cells})
    if missing:
        # Harness errors leave cells without a record: the ledger is incomplete, so is the exit.
        print(f"grid.py: {missing} of {len(cells)} runs have no record (harness errors above); "
              f"`grid.py run --resume {store.folder}` retries them", file=sys.stderr)
        return 1
    return 0


# A store write that fails for one of these stops the grid: every later run would fail the
# same way and be lost as a harness error. ENOSPC/EDQUOT/EROFS stop it wherever they occur
# (the temporary workspaces are storage too); EACCES/EPERM only under the ledger folder, since
# elsewhere they can be a single cell's problem.
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


def _execute(todo: list[Cell], store, tasks, content, swap, entries, fw_versions, timeout_s, max_calls,
             isolation, jobs, progress: bool, meta: dict) -> OSError | None:
    """Run the cells; returns the storage error that stopped the grid early, or None.

    After a storage error no new cell starts; the runs in flight finish (or fail) first.
    """
    from .gateway import Gateway
    from .launch import Launcher
    from .runner import GridContext

    work_dir = Path(tempfile.mkdtemp(prefix="claimgrid-"))
    gateway = Gateway()
    gateway.start()
    launcher = Launcher(entries, isolation=isolation)
    ctx = GridContext(tasks=tasks, content=content, swap=swap, gateway=gateway, launcher=launcher, store=store,
                      work_dir=work_dir, timeout_s=timeout_s, max_model_calls=max_calls, isolation=isolation,
                      framework_versions=fw_versions)
    counts: collections.Counter = collections.Counter()
    reporter = _Progress(len(todo), enabled=progress)
    stopped: OSError | None = None
    try:
        for key in {(c.task, c.content) for c in todo}:  # built once, before threads share them
            try:
                ctx.template(tasks[key[0]], content[key[1]])
            except OSError as exc:
                if exc.errno in _FULL:
                    return exc
                raise
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            pending = {}
            queue = list(todo)
            while (queue and stopped is None) or pending:
                while queue and len(pending) < jobs * 2 and stopped is None:
                    cell = queue.pop(0)
                    pending[pool.submit(_safe_run, cell, ctx)] = cell
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    cell = pending.pop(fut)
                    record, exc = fut.result()
                    if record:
                        counts[record["classification"]["outcome"]] += 1
                        fw = record["framework"]
                        if record.get("runtime_versions") and fw not in meta["retries"]:
                            meta["retries"][fw] = record["runtime_versions"]
                    elif _is_storage_error(exc, store):
                        stopped = stopped or exc
                    else:
                        counts["harness error"] += 1
                        reporter.log(f"harness error in {cell.run_id}: {type(exc).__name__}: {exc}")
                    reporter.advance(counts)
    finally:
        reporter.close()
        launcher.close()
        gateway.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    return stopped


def _safe_run(cell, ctx):
    """A bug in the harness for one cell must not stop the grid; it is reported, and the cell stays missing."""
    from .runner import run_cell
    try:
        return run_cell(cell, ctx), None
    except Exception as exc:  # noqa: BLE001 - reported to the user; the cell can be resumed
        return None, exc


class _Progress:
    """A rich progress bar (runs done, runs/s, elapsed, remaining, outcomes so far) or plain lines."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.enabled = enabled and sys.stdout.isatty()
        self.bar = None
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self.bar = Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[rate]} runs/s"), TimeElapsedColumn(),
                                TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[outcomes]}"))
            self.bar.start()
            self.task = self.bar.add_task("grid", total=total, rate="0.0", outcomes="")

    def advance(self, counts) -> None:
        self.done += 1
        rate = self.done / max(time.monotonic() - self.t0, 1e-9)
        outcomes = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
        if self.bar:
            self.bar.update(self.task, advance=1, rate=f"{rate:.1f}", outcomes=outcomes)
        elif self.done == self.total or self.done % max(1, self.total // 20) == 0:
            print(f"[{self.done}/{self.total}] {rate:.1f} runs/s  {outcomes}", flush=True)

    def log(self, text: str) -> None:
        (self.bar.console.print if self.bar else print)(text)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def cmd_reclassify(args) -> int:
    """Re-derive every classification from the stored evidence; nothing is re-run.

    Every record and its evidence are read and classified before ``runs.jsonl`` is
    rewritten: a missing evidence folder is one line and the ledger stays as it was.
    """
    from .errors import DataError
    records = V.check_reclassify(args.dir)
    store = RunStore(args.dir)
    changed = 0
    for rec in records:
        try:
            facts = RunFacts(**rec["facts"])
        except TypeError as exc:
            raise DataError(store.runs_path, f"{rec['run_id']}.facts", f"not the facts of a run ({exc})") from None
        new = classify(store.load_events(rec["run_id"]), facts)
        if new != rec["classification"]:
            changed += 1
        rec["classification"] = new
    try:
        store.rewrite(records)
    except OSError as exc:
        raise StorageError(f"reclassify {args.dir}: rewriting runs.jsonl failed: {exc.strerror or exc}") from None
    print(f"reclassified {len(records)} runs from stored evidence; {changed} changed")
    try:
        return _finish(store)
    except OSError as exc:
        raise StorageError(f"reclassify {args.dir}: rendering the ledger failed: {exc.strerror or exc}") from None
