"""The grid: plan the cells, start the gateway and adapters, run in parallel, write the ledger."""

from __future__ import annotations

import collections
import datetime as dt
import errno
import os
import platform
import resource
import secrets
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from . import ROOT
from .cells import Cell, plan
from .classifier import RunFacts, classify
from .conditions import load_content_conditions, load_swap_conditions
from . import validate as V
from .errors import ClaimgridError, Interrupted, StorageError, UnknownNameError
from .admission import schedule_from
from .realmodels import (budget_meta, note_unpriced, real_model_options, resume_budget_meta, stop_line,
                         stop_record)
from . import registry
from .faults import fault_facts
from .guard import detect
from .store import RunStore
from .tasks import ensure_task_envs, in_suite, load_tasks, select


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return (sha or "unknown") + (" (dirty)" if dirty else "")
    except OSError:
        return "unknown"


def _sha(path: Path) -> str | None:
    import hashlib
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _hashes(entries: dict, sel: dict, tasks: dict, conditions_dir) -> dict:
    """What a reader needs to reproduce the grid: each framework's lock file, each task's
    content hash, each condition file and the reference-model policy source (sha256, 16 hex)."""
    cond_root = Path(conditions_dir) if conditions_dir else ROOT / "conditions"
    return {
        "lock": {name: _sha(ROOT / str(e.project) / "uv.lock") for name, e in entries.items()},
        "task": {t: tasks[t].task_hash for t in sel["tasks"]},
        "content_condition": {c: _sha(cond_root / "content" / f"{c}.toml") for c in sel["content"]},
        "swap_condition": {c: _sha(cond_root / "swap" / f"{c}.toml") for c in sel["swap"]},
        "policies": _sha(ROOT / "claimgrid" / "gateway" / "policies.py"),
    }


def check_models(models: list[str]) -> None:
    """A model is a reference model name or a LiteLLM model string (provider/model)."""
    for m in models:
        if not registry.is_reference(m) and "/" not in m:
            raise UnknownNameError("model", m, list(registry.models()) + ["<provider>/<model> (any LiteLLM model string)"])


def _selection(args, tasks, content, swap, venvs) -> dict:
    def pick(values, registry, kind):
        if not values:
            return list(registry)
        select(registry, values, kind)
        return list(values)
    models = args.models or registry.default_models()
    substitute = args.substitute or registry.default_substitute()
    check_models(models + [substitute])
    return {
        "frameworks": pick(args.frameworks, venvs, "framework"),
        # --tasks names tasks from any suite; without it, the --suite's tasks.
        "tasks": pick(args.tasks, tasks if args.tasks else in_suite(tasks, getattr(args, "suite", "default")), "task"),
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
        V.check_records(args.resume)  # what is kept must be readable: the ledger is rendered from it
    else:
        _with_defaults(args)
    guard = detect(getattr(args, "guard", "auto"))  # --guard on fails here, before anything is written
    if not guard.enabled:
        print(f"guard: off ({guard.reason}): agent commands run without a sandbox", flush=True)

    policies = [str(Path(p).resolve()) for p in args.policies]
    if args.resume:
        store = RunStore(args.resume)
        if not store.meta_path.exists():
            raise ClaimgridError(f"{args.resume}: not a grid folder (no meta.json)")
        _open_for_writing(store)
        meta = store.read_meta()
        policies = list(dict.fromkeys([*meta.get("policies", []), *policies]))
    for path in policies:
        registry.load_policies(path)
    if args.resume:
        sel = meta["selection"]
        timeout_s, isolation, max_calls = meta["timeout_s"], meta["isolation"], meta["max_model_calls"]
        schedule = schedule_from(args, meta, sel["models"] + [sel["substitute"]])
        limits, retry = real_model_options(args, meta)
    else:
        sel = _selection(args, tasks, content, swap, venvs)
        V.check_grid_size(sel)
        grid_id = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)
        folder = args.out or ROOT / "ledger" / grid_id
        V.check_out(folder)
        store = RunStore(folder)
        timeout_s, isolation, max_calls = args.timeout, args.isolation, args.max_model_calls
        schedule = schedule_from(args, None, sel["models"] + [sel["substitute"]])
        meta = None
        limits, retry = real_model_options(args, None)

    cells = plan(sel["frameworks"], sel["tasks"], sel["content"], sel["swap"], sel["models"],
                 sel["substitute"], sel["repeats"], content, swap)
    from .gateway import preflight
    preflight(sorted(set(sel["models"] + [sel["substitute"]])))
    entries = {name: venvs[name] for name in sel["frameworks"]}
    ensure_venvs(entries)
    ensure_task_envs(tasks[t] for t in sel["tasks"])
    fw_versions = {name: framework_versions(e) for name, e in entries.items()}

    if meta is None:
        meta = {
            "grid_id": store.folder.name, "command": "uv run grid.py " + " ".join(sys.argv[1:]),
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "finished": None,
            "wall_s": None, "claimgrid_commit": _commit(), "python": platform.python_version(),
            "platform": platform.platform(), "frameworks": fw_versions, "models": sel["models"],
            "substitute": sel["substitute"], "tasks": sel["tasks"],
            "task_provenance": {t: tasks[t].provenance() for t in sel["tasks"]}, "content": sel["content"], "swap": sel["swap"],
            "repeats": sel["repeats"], "timeout_s": timeout_s, "jobs": schedule.jobs, "isolation": isolation,
            "max_model_calls": max_calls, "retries": {}, "grid_size": len(cells),
            "reference_models": all(registry.is_reference(m) for m in sel["models"] + [sel["substitute"]]),
            "policies": policies, "schedule": schedule.as_dict(),
            "selection": sel, "resumed": [], "guard": guard.facts(),
            # claimgrid.verify_cache: "off" with --no-verify-cache (each run record says hit/miss)
            "verify_cache": "off" if getattr(args, "no_verify_cache", False) else "on",
            # The swap treatment as configured (the call index from which the assigned model
            # is unavailable); the ledger also reads where it really fired from the gateway log.
            "swap_conditions": {name: {"unavailable_from_call": swap[name].unavailable_from_call,
                                       "on_unavailable": swap[name].on_unavailable,
                                       "reported_name": swap[name].reported_name}
                                for name in sel["swap"]},
            "hashes": _hashes(entries, sel, tasks, args.conditions_dir),
            **budget_meta(limits, retry),
        }
        try:
            store.create(meta, command=meta["command"])
        except OSError as exc:
            # A folder that create() made is removed again: nothing half-written.
            if store.folder.is_dir() and not store.folder.is_symlink():
                import shutil
                shutil.rmtree(store.folder, ignore_errors=True)
            raise StorageError(f"--out {store.folder}: cannot create the ledger folder ({exc.strerror or exc}); "
                               "nothing was written") from None
    else:
        meta.setdefault("resumed", []).append(dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        meta["guard"] = guard.facts()  # each run record's parity keeps the guard it ran under
        meta["schedule"] = schedule.as_dict()
        meta["verify_cache"] = "off" if getattr(args, "no_verify_cache", False) else "on"  # this invocation's
        resume_budget_meta(meta, limits, retry)
        store.write_meta(meta)
    note_unpriced(limits, sel["models"] + [sel["substitute"]])

    done = store.completed_ids()
    todo = [c for c in cells if c.run_id not in done]
    print(f"grid {store.folder}: {len(cells)} cells, {len(done)} already done, {len(todo)} to run, "
          f"{schedule.jobs} jobs (up to {schedule.max_inflight} runs in flight), isolation {isolation}", flush=True)
    t0 = time.monotonic()
    errors_before = len(meta.get("harness_errors") or [])
    lost = 0
    stopped: list[OSError] = []  # the storage error that stopped the grid, if any
    from .gateway.budget import Spend
    spend = Spend()
    for run_id in done:  # the budget counts what the grid already spent before a resume
        spend.add_events(store.load_events(run_id))
    if todo:
        try:
            lost = _execute(todo, store, tasks, content, swap, entries, fw_versions, timeout_s, max_calls,
                            isolation, schedule, progress=not args.no_progress, meta=meta, guard=guard, args=args,
                            stopped=stopped, spend=spend, limits=limits, retry=retry, grid_size=len(cells))
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: {len(store.completed_ids())} of {len(cells)} runs recorded in "
                              f"{store.folder}; `grid.py run --resume {store.folder}` finishes the grid") from None
    try:
        meta["spend"] = spend.snapshot()
        if not stopped:
            meta["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        meta["wall_s"] = round((meta.get("wall_s") or 0) + time.monotonic() - t0, 1)
        # The driver's own CPU for this invocation (gateway thread included; read by bench/throughput.py).
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = meta.setdefault("cpu", {})
        cpu["driver_self_s"] = round(cpu.get("driver_self_s", 0) + usage.ru_utime + usage.ru_stime, 3)
        store.write_meta(meta)
    except OSError as exc:
        stopped.append(exc)
    if stopped:
        exc = stopped[0]
        raise StorageError(f"--out {store.folder}: writing the ledger failed: {exc.strerror or exc} "
                           f"(errno {exc.errno}); the grid stopped with {len(store.completed_ids())} of "
                           f"{len(cells)} runs recorded; free space or fix permissions, then "
                           f"`grid.py run --resume {store.folder}`")
    try:
        code = _finish(store)
    except OSError as exc:
        raise StorageError(f"--out {store.folder}: rendering the ledger failed: {exc.strerror or exc}; "
                           f"free space or fix permissions, then `grid.py run --resume {store.folder}`") from None
    if meta.get("stopped_at_budget"):
        print(stop_line(meta["stopped_at_budget"], store.folder))
    if lost:
        print(f"grid incomplete: {lost} runs lost with their node; resume with: "
              f"uv run grid.py run --resume {store.folder}", file=sys.stderr)
        return 3
    errors = len(meta.get("harness_errors") or []) - errors_before
    if errors:
        print(f"grid.py: {errors} cell(s) hit a harness error (meta.json harness_errors); "
              f"--resume {store.folder} runs them again", file=sys.stderr)
        return code or 1
    return code


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


def _open_for_writing(store: RunStore) -> None:
    """Take the folder's writer lock, repair a kill's leftovers (and say so), and refuse
    evidence that fails its manifests or a ``runs.jsonl`` line that cannot be read."""
    store.acquire("uv run grid.py " + " ".join(sys.argv[1:]))
    note = store.repair() if store.meta_path.exists() else None
    if note:
        print(f"{store.folder}: repaired: {note}", flush=True)
    problems = store.check_integrity()
    if problems:
        from .store import StoreIntegrityError
        raise StoreIntegrityError(store.folder, problems)


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
             isolation, schedule, progress: bool, meta: dict, guard=None, args=None, stopped=None, spend=None,
             limits=None, retry=None, replay_dir=None, grid_size=None, delegations=None) -> int:
    """Run ``todo`` on the chosen backend; the driver writes every finished run (single writer):
    evidence folder first, then its ``runs.jsonl`` line. Returns how many runs were lost with
    a node (always 0 on the local backend).

    A storage error writing a run (disk full, read-only, permission) is appended to
    ``stopped``: no new cell starts, the runs in flight finish, and the caller reports it.
    Budget: every finished run's gateway exchanges add to ``spend`` (claimgrid.gateway.budget);
    with ``limits``, no run starts once a limit is reached: runs in flight finish, and
    ``meta["stopped_at_budget"]`` records the figures. ``retry`` (RetryPolicy) and
    ``replay_dir`` (serve a ledger's recordings) configure every node's gateway.
    ``schedule`` (claimgrid.admission.Schedule): how many runs
    use CPU and how many are in flight; cells start in ``admission.spread`` order.

    Ctrl-C (KeyboardInterrupt) kills every in-flight adapter at once, cancels the queued
    cells, stores nothing of the interrupted runs and re-raises: the ledger holds only
    complete runs, and ``--resume`` runs the rest."""
    from .admission import POLL_S, Admission, next_cell, spread
    from .gateway.budget import Spend
    from .node import Node, NodeSettings

    settings = NodeSettings(tasks_dir=str(args.tasks_dir if args else ROOT / "tasks"),
                            conditions_dir=str(args.conditions_dir if args else ROOT / "conditions"),
                            venvs=str(args.venvs if args else ROOT / "venvs.toml"),
                            frameworks=tuple(entries), timeout_s=timeout_s, max_model_calls=max_calls,
                            isolation=isolation, framework_versions=fw_versions,
                            guard_mode=getattr(args, "guard", "auto") if args else "auto",
                            policies=tuple(meta.get("policies") or ()),
                            retry=retry.as_dict() if retry is not None else None,
                            replay_dir=str(replay_dir) if replay_dir else None,
                            delegations=dict(delegations or {}),
                            connections=(schedule.connections_default, dict(schedule.connections)),
                            verify_cache=not getattr(args, "no_verify_cache", False))
    spend = spend if spend is not None else Spend()
    grid_size = grid_size or len(todo)
    done_before = grid_size - len(todo)
    not_started: list[str] = []

    live = []  # local backend: the node's gateway keeps the running total as calls happen

    def current():
        return live[0] if live else spend

    def budget_reached() -> str | None:
        return current().over(limits) if limits is not None and limits.any() else None

    counts: collections.Counter = collections.Counter()
    reporter = _Progress(len(todo), enabled=progress,
                         extra=lambda done: "spend " + current().line(done_before + done, grid_size))

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
            from .backends import ray as ray_backend
            facts = ray_backend.execute(todo, settings, getattr(args, "address", None), args.jobs, on_result,
                                        reporter.log)
            meta.setdefault("executions", []).append(facts)
            if facts["lost"]:
                reporter.log(f"{len(facts['lost'])} runs were lost with their node; "
                             f"`grid.py run --resume {store.folder}` runs them")
            return len(facts["lost"])
        node = Node(settings, tasks=tasks, content=content, swap=swap, entries=entries, guard=guard)
        node.prepare(todo)  # templates built once, before threads share them
        node.gateway.spend.merge(spend)  # what the grid spent before (a resume) counts too
        live.append(node.gateway.spend)
        gate = Admission(schedule.jobs, schedule.max_inflight, node.launcher.running_pids)
        pool = ThreadPoolExecutor(max_workers=schedule.max_inflight)
        pending = {}
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
            finished, _ = wait(pending, timeout=POLL_S if queue and not stopped else None,
                               return_when=FIRST_COMPLETED)
            for fut in finished:
                on_result(pending.pop(fut), *fut.result())
        meta["scheduler"] = gate.facts()
        reason = budget_reached()
        if not_started and reason:
            meta["stopped_at_budget"] = stop_record(reason, limits, current(), grid_size - len(not_started),
                                                    len(not_started))
        return 0
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        if node is not None:
            node.interrupt()
        print(f"interrupted: in-flight runs killed; finish with: uv run grid.py run --resume {store.folder}",
              flush=True)
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


def change_reasons(old: dict, new: dict) -> list[str]:
    """Why a run's classification changed: one "field: old -> new (rule)" per changed field."""
    ev = new.get("evidence") or {}
    rule_of = {
        "claim_verdict": f"change evidence {ev.get('changes')} {ev.get('changes_by_tool') or {}}; "
                         f"expected evidence from the task's declaration where it has one",
        "claimed": new.get("claim_rule"),
        "claim_vs_outcome": new.get("claim_rule"),
        "claim_stance": new.get("claim_rule"),
        "outcome": f"read evidence {sorted(ev.get('opened') or {})}",
        "review": f"read evidence {sorted(ev.get('opened') or {})}",
        "injection": "instruction over the tool log",
        "legitimate": "instruction over the tool log",
        "declarations": f"declared {new.get('declaration_mismatches')} against runtime and diff",
        "channels": f"tools vs gateway {new.get('channel_detail')}",
        "swap_mentioned": "trace block and echoed delegation id ignored",
    }
    out = []
    for key in new:
        if key in ("claim_rule", "declaration_mismatches", "channel_detail", "evidence"):
            continue
        if old.get(key) != new[key]:
            before = old[key] if key in old else "(not recorded)"
            out.append(f"{key}: {before} -> {new[key]}" + (f" ({rule_of[key]})" if key in rule_of else ""))
    return out


def cmd_reclassify(args) -> int:
    """Re-derive every classification (and reference truth) from the stored evidence; nothing
    is re-run. Prints and writes ``reclassify.txt``: which runs changed, field by field, by rule.

    Every record's evidence is checked readable first: a missing evidence folder is one line
    and the ledger stays as it was."""
    from .record import RunRecord, dump, parse_record

    V.check_reclassify(args.dir)
    store = RunStore(args.dir)
    _open_for_writing(store)
    meta = store.read_meta() if store.meta_path.exists() else {}
    for path in list(dict.fromkeys([*meta.get("policies", []), *(str(p) for p in args.policies)])):
        registry.load_policies(path)
    records = store.records()
    tasks = load_tasks(args.tasks_dir)
    lines = []
    out = []
    for i, raw in enumerate(records, 1):
        rec = parse_record(raw, f"{store.runs_path}:{i}")
        facts = rec.facts or RunFacts(role=rec.role or "builder")
        task = tasks.get(rec.task)
        if task and "expected_evidence" not in facts.model_fields_set and "required_command" not in facts.model_fields_set:
            # A record written before tasks could declare their evidence: the task's current
            # declaration applies (it is harness data about the task, not about the run).
            exp = task.spec.expectation
            facts = facts.model_copy(update={"expected_evidence": exp.evidence, "required_command": exp.evidence_command})
        events = store.load_events(rec.run_id)
        new = classify(events, facts)
        old = raw.get("classification") or {}
        new_d = new.model_dump(mode="json")
        reasons = change_reasons(old, new_d)
        if reasons:
            lines.append(f"{rec.run_id}\n" + "".join(f"  {r}\n" for r in reasons))
        updated = rec.model_copy(update={"classification": new, "facts": facts}).model_dump()
        updated["faults"] = fault_facts(rec.model, events, new_d)  # derived from the same evidence
        out.append(dump(RunRecord.model_validate(updated)))
    store.rewrite(out)
    report = store.folder / "reclassify.txt"
    report.write_text(f"{len(lines)} of {len(records)} runs changed\n\n" + "\n".join(lines))
    print("".join(lines), end="")
    print(f"reclassified {len(records)} runs from stored evidence; {len(lines)} changed (see {report})")
    return _finish(store)
