"""``grid.py run``: validate everything (flags, data, a resumed folder), then run the grid and render its ledger."""

from __future__ import annotations

import datetime as dt
import platform
import resource
import secrets
import sys
import time
from pathlib import Path

from claimgrid import ROOT
from claimgrid.commands import validate as V
from claimgrid.commands.common import _commit, _finish, _open_for_writing
from claimgrid.errors import ClaimgridError, Interrupted, StorageError, UnknownNameError
from claimgrid.execute.admission import schedule_from
from claimgrid.execute.cells import plan
from claimgrid.execute.engine import _execute
from claimgrid.execute.spending import (
    budget_meta,
    note_unpriced,
    real_model_options,
    resume_budget_meta,
    stop_line,
)
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import ensure_task_envs, in_suite, load_tasks, select
from claimgrid.reference import registry
from claimgrid.sandbox.guard import detect
from claimgrid.store import RunStore


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
        "policies": _sha(ROOT / "claimgrid" / "reference" / "policies.py"),
    }


def check_models(models: list[str]) -> None:
    """A model is a reference model name or a LiteLLM model string (provider/model)."""
    for m in models:
        if not registry.is_reference(m) and "/" not in m:
            raise UnknownNameError(
                "model", m, list(registry.models()) + ["<provider>/<model> (any LiteLLM model string)"]
            )


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
        "models": models,
        "substitute": substitute,
        "repeats": args.repeats,
    }


def _with_defaults(args) -> None:
    """Fill the grid-defining flags left out (they parse to None so --resume can tell)."""
    for dest, default in (
        ("repeats", V.DEFAULT_REPEATS),
        ("timeout", V.DEFAULT_TIMEOUT_S),
        ("isolation", V.DEFAULT_ISOLATION),
        ("max_model_calls", V.DEFAULT_MAX_MODEL_CALLS),
    ):
        if getattr(args, dest, None) is None:
            setattr(args, dest, default)


def cmd_run(args) -> int:
    """Validate everything (flags, data, a resumed folder), then run; nothing is written before."""
    from claimgrid.inputs.venvs import ensure_venvs, framework_versions, load_venvs

    V.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    venvs = load_venvs(args.venvs)
    if args.resume:
        meta = V.read_meta(args.resume)
        V.check_resume(args, meta, args.resume)
        V.check_stored_names(
            meta, args.resume / "meta.json", {"frameworks": venvs, "tasks": tasks, "content": content, "swap": swap}
        )
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
        grid_id = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)
        folder = args.out or ROOT / "ledger" / grid_id
        V.check_out(folder)
        store = RunStore(folder)
        timeout_s, isolation, max_calls = args.timeout, args.isolation, args.max_model_calls
        schedule = schedule_from(args, None, sel["models"] + [sel["substitute"]])
        meta = None
        limits, retry = real_model_options(args, None)

    cells = plan(
        sel["frameworks"],
        sel["tasks"],
        sel["content"],
        sel["swap"],
        sel["models"],
        sel["substitute"],
        sel["repeats"],
        content,
        swap,
    )
    from claimgrid.gateway import preflight

    preflight(sorted(set(sel["models"] + [sel["substitute"]])))
    entries = {name: venvs[name] for name in sel["frameworks"]}
    ensure_venvs(entries)
    ensure_task_envs(tasks[t] for t in sel["tasks"])
    fw_versions = {name: framework_versions(e) for name, e in entries.items()}

    if meta is None:
        from claimgrid.ledger.facts import grid_facts  # the ledger's facts block, at the end of meta

        meta = {
            "grid_id": store.folder.name,
            "command": "uv run grid.py " + " ".join(sys.argv[1:]),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "finished": None,
            "wall_s": None,
            "claimgrid_commit": _commit(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "frameworks": fw_versions,
            "models": sel["models"],
            "substitute": sel["substitute"],
            "tasks": sel["tasks"],
            "task_provenance": {t: tasks[t].provenance() for t in sel["tasks"]},
            "content": sel["content"],
            "swap": sel["swap"],
            "repeats": sel["repeats"],
            "timeout_s": timeout_s,
            "jobs": schedule.jobs,
            "isolation": isolation,
            "max_model_calls": max_calls,
            "retries": {},
            "grid_size": len(cells),
            "reference_models": all(registry.is_reference(m) for m in sel["models"] + [sel["substitute"]]),
            "policies": policies,
            "schedule": schedule.as_dict(),
            "selection": sel,
            "resumed": [],
            "guard": guard.facts(),
            # claimgrid.verify.cache: "off" with --no-verify-cache (each run record says hit/miss)
            "verify_cache": "off" if getattr(args, "no_verify_cache", False) else "on",
            # The swap treatment as configured (the call index from which the assigned model
            # is unavailable); the ledger also reads where it really fired from the gateway log.
            "swap_conditions": {
                name: {
                    "unavailable_from_call": swap[name].unavailable_from_call,
                    "on_unavailable": swap[name].on_unavailable,
                    "reported_name": swap[name].reported_name,
                }
                for name in sel["swap"]
            },
            "hashes": _hashes(entries, sel, tasks, args.conditions_dir),
            **budget_meta(limits, retry),
            # ---- what the ledger renders from (claimgrid.ledger.facts.grid_facts): "task_facts"
            # {task: {role, attacker_goal_check, legitimate_note_check}} and "content_facts"
            # {content: {carries}}, so the ledger never reads today's tasks/ or conditions/.
            **grid_facts({t: tasks[t] for t in sel["tasks"]}, {c: content[c] for c in sel["content"]}),
            # ---- end of the ledger's facts
        }
        try:
            store.create(meta, command=meta["command"])
        except OSError as exc:
            # A folder that create() made is removed again: nothing half-written.
            if store.folder.is_dir() and not store.folder.is_symlink():
                import shutil

                shutil.rmtree(store.folder, ignore_errors=True)
            raise StorageError(
                f"--out {store.folder}: cannot create the ledger folder ({exc.strerror or exc}); nothing was written"
            ) from None
    else:
        meta.setdefault("resumed", []).append(dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        meta["guard"] = guard.facts()  # each run record's parity keeps the guard it ran under
        meta["schedule"] = schedule.as_dict()
        meta["verify_cache"] = "off" if getattr(args, "no_verify_cache", False) else "on"  # this invocation's
        resume_budget_meta(meta, limits, retry)
        store.write_meta(meta)
    note_unpriced(limits, sel["models"] + [sel["substitute"]])

    done = store.completed_ids()
    todo = [c for c in cells if c.run_id not in done]
    print(
        f"grid {store.folder}: {len(cells)} cells, {len(done)} already done, {len(todo)} to run, "
        f"{schedule.jobs} jobs (up to {schedule.max_inflight} runs in flight), isolation {isolation}",
        flush=True,
    )
    t0 = time.monotonic()
    errors_before = len(meta.get("harness_errors") or [])
    lost = 0
    stopped: list[OSError] = []  # the storage error that stopped the grid, if any
    from claimgrid.gateway.budget import Spend

    spend = Spend()
    for run_id in done:  # the budget counts what the grid already spent before a resume
        spend.add_events(store.load_events(run_id))
    if todo:
        try:
            lost = _execute(
                todo,
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
                progress=not args.no_progress,
                meta=meta,
                guard=guard,
                args=args,
                stopped=stopped,
                spend=spend,
                limits=limits,
                retry=retry,
                grid_size=len(cells),
            )
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted: {len(store.completed_ids())} of {len(cells)} runs recorded in "
                f"{store.folder}; `grid.py run --resume {store.folder}` finishes the grid"
            ) from None
    try:
        meta["spend"] = spend.snapshot()
        if not stopped:
            meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
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
        raise StorageError(
            f"--out {store.folder}: writing the ledger failed: {exc.strerror or exc} "
            f"(errno {exc.errno}); the grid stopped with {len(store.completed_ids())} of "
            f"{len(cells)} runs recorded; free space or fix permissions, then "
            f"`grid.py run --resume {store.folder}`"
        )
    try:
        code = _finish(store)
    except OSError as exc:
        raise StorageError(
            f"--out {store.folder}: rendering the ledger failed: {exc.strerror or exc}; "
            f"free space or fix permissions, then `grid.py run --resume {store.folder}`"
        ) from None
    if meta.get("stopped_at_budget"):
        print(stop_line(meta["stopped_at_budget"], store.folder))
    if lost:
        print(
            f"grid incomplete: {lost} runs lost with their node; resume with: "
            f"uv run grid.py run --resume {store.folder}",
            file=sys.stderr,
        )
        return 3
    errors = len(meta.get("harness_errors") or []) - errors_before
    if errors:
        print(
            f"grid.py: {errors} cell(s) hit a harness error (meta.json harness_errors); "
            f"--resume {store.folder} runs them again",
            file=sys.stderr,
        )
        return code or 1
    return code
