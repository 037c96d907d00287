"""``grid.py run``: validate everything (flags, data, a resumed folder), then run the grid and render its ledger.

validation -> spec (claimgrid.commands.flags) -> store -> ``execute`` (claimgrid.execute.engine)
-> finish (meta.json, ledger). Nothing is written before every check passed.
"""

from __future__ import annotations

import datetime as dt
import platform
import resource
import secrets
import sys
import time
from pathlib import Path

from claimgrid import ROOT, localmodel
from claimgrid.classify import judge
from claimgrid.classify.tables import table_facts
from claimgrid.commands import flags
from claimgrid.commands import validate as V
from claimgrid.commands.common import commit, finish, now, open_for_writing, read_grid_meta, signer, write_meta
from claimgrid.commands.options import allow_unsealed_opt, claim_judge_opt, data_opts, key_opt, policies_opt
from claimgrid.commands.reclassify import rederive
from claimgrid.errors import ClaimgridError, Interrupted, StorageError
from claimgrid.execute.cells import Cell, plan
from claimgrid.execute.engine import execute
from claimgrid.execute.model_limits import line
from claimgrid.execute.spec import GridInputs, GridMeta, GridReport, GridSpec, RunSettings
from claimgrid.execute.spending import note_unpriced, stop_line
from claimgrid.inputs.tasks import ensure_task_envs
from claimgrid.inputs.venvs import Builds, build_all, framework_versions
from claimgrid.machinepaths import scrub_text
from claimgrid.reference import registry
from claimgrid.sandbox.guard import detect
from claimgrid.store import RunStore
from claimgrid.store.inert import check_folder


def cmd_run(args) -> int:
    """Validate everything (flags, data, a resumed folder), then run; nothing is written before."""
    V.check_data_flags(args)
    data = flags.load_data(args)
    if getattr(args, "claim_judge", None):
        judge.check_judge(args.claim_judge)  # one line before anything is opened or written
    meta: GridMeta | None = None
    if args.resume:
        spec = _check_resumed(args, data)
        guard = _guard(args.guard)
        V.check_unguarded_agents(spec.selection, data.venvs, guard)  # this invocation's guard
        store, meta, spec = _open_resumed(args, spec)
    else:
        guard = _guard(args.guard)
        spec, store = _new_grid(args, data, guard)
    settings = flags.run_settings(args, meta.dump() if meta else None, spec.selection.all_models)
    catalog = getattr(args, "local_models", None) or localmodel.CATALOG
    server_url = getattr(args, "server_url", None)
    local = list(localmodel.check(list(spec.selection.all_models), catalog))  # a bad entry: one line
    local += localmodel.check_server(list(spec.selection.all_models), server_url)
    if settings.backend == "ray":
        if local:
            raise ClaimgridError(
                f"--backend ray with {', '.join(local)}: a local model is served by the driver's machine only; "
                'run it on the local backend (docs/ray.md, "Local models")'
            )
        from claimgrid.execute import ray as ray_backend

        ray_backend.preflight(settings.address)  # an unreachable cluster: one line, nothing written
    cells = plan(spec.selection, data.content, data.swap)
    # Each local model's server runs while the grid does, and is stopped however the grid
    # ends (an error, Ctrl-C); if the driver is killed, the server sees its pipe close.
    servers = localmodel.serve(list(spec.selection.all_models), settings.max_inflight, catalog, server_url)
    try:
        inputs = _prepare(spec, data, guard, servers, background=settings.backend != "ray")
        if meta is None:
            meta = _create(store, spec, settings, inputs, [c.run_id for c in cells])
        else:
            _reopen(store, meta, spec, settings, guard)
        if servers:
            meta.local_models = {s.model: s.facts() for s in servers}  # type: ignore[attr-defined]  # a key GridMeta keeps unnamed (extra="allow")
            write_meta(store, meta)
        note_unpriced(spec.budget.limits(), spec.selection.all_models)
        return _run(store, cells, spec, settings, inputs, meta)
    finally:
        for server in servers:
            server.stop()


def resume_command(store: RunStore, settings: RunSettings) -> str:
    """The command that finishes this grid on the backend it ran on."""
    if settings.backend == "ray":
        address = f" --address {settings.address}" if settings.address else ""
        return f"uv run --extra ray grid.py run --resume {store.folder} --backend ray{address}"
    return f"uv run grid.py run --resume {store.folder}"


def _guard(mode: str):
    """The sandbox of this invocation: ``--guard on`` fails here, before anything is written."""
    guard = detect(mode)
    if not guard.enabled:
        print(f"guard: off ({guard.reason}): agent commands run without a sandbox", flush=True)
    return guard


def _check_resumed(args, data: flags.Data) -> GridSpec:
    """The resumed folder's checks (before its lock is taken); the spec it runs with."""
    check_folder(args.resume)  # a FIFO or symlink at meta.json is refused before it is read
    stored = V.read_meta(args.resume)
    spec = V.check_resume(args, stored, args.resume)
    registries = {"frameworks": data.venvs, "tasks": data.tasks, "content": data.content, "swap": data.swap}
    V.check_stored_names(stored, args.resume / "meta.json", registries)
    V.check_records(args.resume)  # what is kept must be readable: the ledger is rendered from it
    return spec


def _open_resumed(args, spec: GridSpec) -> tuple[RunStore, GridMeta, GridSpec]:
    """The resumed folder, locked, repaired and its seal verified (sealed by the writer's key);
    its meta.json; the spec with the policy files it loads: only those named with
    ``--policies``, each recorded one among them by sha256 (nothing in the folder is
    imported). Every stored run's classification is then derived again from its evidence
    (:func:`claimgrid.commands.reclassify.rederive`): a stored line is not trusted."""
    folder = args.resume
    store = RunStore(folder, signer(args, folder))
    if not store.meta_path.exists():
        raise ClaimgridError(f"{folder}: not a grid folder (no meta.json)")
    meta = read_grid_meta(store)
    files = registry.load_recorded(meta.policy_files, meta.policies, args.policies, store.meta_path, store.folder)
    open_for_writing(store, same_key=True, allow_unsealed=args.allow_unsealed)
    changed = rederive(store, args.tasks_dir)
    if changed:
        print(
            f"{store.folder}: {len(changed)} stored run(s) classified again from their evidence differ "
            f"from their line and were rewritten: {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}",
            flush=True,
        )
    return store, meta, spec.model_copy(update={"policies": tuple(files)})


def _new_grid(args, data: flags.Data, guard) -> tuple[GridSpec, RunStore]:
    """A new grid's spec and (not yet created) store; the selection and --out are checked."""
    for path in flags.policy_files(args):  # before the selection: they register model names
        registry.load_policies(path)
    sel = flags.selection(args, data.tasks, data.content, data.swap, data.venvs)
    V.check_grid_size(sel)
    V.check_unguarded_agents(sel, data.venvs, guard)
    grid_id = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)
    folder = args.out or ROOT / "ledger" / grid_id
    V.check_out(folder)
    return flags.new_spec(args, sel), RunStore(folder, signer(args, folder))


def _prepare(
    spec: GridSpec, data: flags.Data, guard, servers: list[localmodel.Served], background: bool = True
) -> GridInputs:
    """The models answer (preflight; a local model's server is already up and registered with
    the gateway's Router), the task environments exist, the framework venvs are
    built: the engine's inputs. ``background`` (the local backend): the venvs build in the
    background, a bounded pool at a time (claimgrid.inputs.venvs.Builds), and the engine starts
    each framework's runs once its venv is ready; a failed build is recorded, not raised. Else
    (the Ray backend) every venv is built here and a failure stops the grid before anything is
    written."""
    from claimgrid.gateway import preflight

    preflight(sorted(m for m in set(spec.selection.all_models) if not localmodel.is_local(m)))
    if servers:
        from claimgrid.gateway.providers import register_local

        for s in servers:
            register_local(s.model, s.api_base, s.output_cap, s.api_key)
            _banner(s, spec)
    entries = {name: data.venvs[name] for name in spec.selection.frameworks}
    builds = Builds(entries).start() if background else None
    if builds is None:
        build_all(entries)
    elif not builds.done():
        print(f"venvs: {builds.summary()} (in the background; each framework's runs start once its venv is built)")
    ensure_task_envs(data.tasks[t] for t in spec.selection.tasks)  # meanwhile: the verifier needs them
    versions = {name: framework_versions(e) for name, e in entries.items()}
    return GridInputs(
        data.tasks,
        data.content,
        data.swap,
        entries,
        versions,
        guard,
        builds,
        call_deadlines={s.model: s.deadline["seconds"] for s in servers if s.deadline},
        served_models={s.model: localmodel.parity_facts(s.facts()) for s in servers},
    )


def _banner(s: localmodel.Served, spec: GridSpec) -> None:
    """What a served model is and the limits it runs under, before the grid starts ("unknown"
    for what its server did not say)."""
    p, speed, d = s.provenance, s.provenance["speed"], s.deadline

    def say(v, n: int = 0) -> str:
        return "unknown" if v is None else (str(v)[:n] if n else str(v))

    e, w, t = p["engine"], p["weights"], p["template"]
    print(
        f"local model {s.model}: {say(e['name'])} {say(e['version'])} (llama.cpp commit "
        f"{say(e['llama_cpp_commit'], 9)}{', ' + e['package'] if e.get('package') else ''}), weights "
        f"{say(w['file'])} sha256 {say(w['sha256'], 16)}, template {say(t['name'])} ({say(t['sha256'], 16)}), "
        f"context {say(p['context'])}, threads {say(p['threads'])}, seed {say(p['seed'])}, "
        f"temperature {say(p['temperature'])}; served at {s.api_base}\n  measured "
        f"{speed['prompt_tokens_per_s']:g} prompt tokens/s, {speed['generation_tokens_per_s']:g} generated "
        "tokens/s: "
        + (
            f"per-call deadline {d['seconds']:g} s = {d['rule']}; output cap {s.output_cap} tokens per call"
            if d
            else "the grid's per-call deadline and output cap (the server's context and cap are its own)"
        ),
        flush=True,
    )
    if not d:
        return
    if spec.provider_retry.timeout_s < d["seconds"]:
        print(
            f"  note: the gateway abandons a provider call after {spec.provider_retry.timeout_s:g} s "
            "(--provider-timeout), before this deadline",
            flush=True,
        )
    if spec.timeout_s < d["seconds"]:
        print(
            f"  note: --timeout {spec.timeout_s:g} s is shorter than one call's deadline: a slow call "
            "ends the run at the harness's timeout",
            flush=True,
        )


def _sha(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _hashes(spec: GridSpec, inputs: GridInputs) -> dict:
    """What a reader needs to reproduce the grid: each framework's lock file, each task's
    content hash, each condition file and the reference-model policy source (sha256, 16 hex)."""
    sel, cond_root = spec.selection, Path(spec.data.conditions_dir)
    return {
        "lock": {name: _sha(ROOT / str(e.project) / "uv.lock") for name, e in inputs.entries.items()},
        "task": {t: inputs.tasks[t].task_hash for t in sel.tasks},
        "content_condition": {c: _sha(cond_root / "content" / f"{c}.toml") for c in sel.content},
        "swap_condition": {c: _sha(cond_root / "swap" / f"{c}.toml") for c in sel.swap},
        "policies": _sha(ROOT / "claimgrid" / "reference" / "policies.py"),
    }


def _swap_facts(names, swap: dict) -> dict:
    """Each swap condition's treatment as configured (the call index from which the assigned
    model is unavailable); the ledger also reads where it really fired from the gateway log."""
    return {
        name: {
            "unavailable_from_call": swap[name].unavailable_from_call,
            "on_unavailable": swap[name].on_unavailable,
            "reported_name": swap[name].reported_name,
        }
        for name in names
    }


def _create(store: RunStore, spec: GridSpec, settings: RunSettings, inputs: GridInputs, planned: list[str]) -> GridMeta:
    """A new grid's meta.json (docs/ledger-readers.md, "Grid meta"), written with the folder."""
    from claimgrid.ledger.facts import grid_facts  # the ledger's facts block, at the end of meta

    sel, keys = spec.selection, spec.meta()
    # as typed, with this machine's folders named by their role (a published ledger holds none)
    command = scrub_text("uv run grid.py " + " ".join(sys.argv[1:]))
    meta = GridMeta(
        grid_id=store.folder.name,
        command=command,
        started=now(),
        finished=None,
        wall_s=None,
        claimgrid_commit=commit(),
        python=platform.python_version(),
        platform=platform.platform(),
        frameworks=inputs.framework_versions,
        **{k: keys[k] for k in ("models", "substitute", "tasks")},
        task_provenance={t: inputs.tasks[t].provenance() for t in sel.tasks},
        **{k: keys[k] for k in ("content", "swap", "repeats", "timeout_s")},
        jobs=settings.jobs,
        **{k: keys[k] for k in ("isolation", "max_model_calls")},
        retries={},
        grid_size=len(planned),
        plan=planned,
        reference_models=all(registry.is_reference(m) for m in sel.all_models),
        policies=keys["policies"],
        policy_files=[f for f in registry.loaded_files() if f["path"] in spec.policies],
        schedule=settings.schedule.as_dict(),
        selection=keys["selection"],
        resumed=[],
        guard=inputs.guard.facts(),
        # claimgrid.verify.cache: "off" with --no-verify-cache (each run record says hit/miss)
        verify_cache=keys["verify_cache"],
        swap_conditions=_swap_facts(sel.swap, inputs.swap),
        hashes=_hashes(spec, inputs),
        **{k: keys[k] for k in ("budget", "provider_retry", "limits")},
        spend=None,
        stopped_at_budget=None,
        # What the ledger renders from (claimgrid.ledger.facts.grid_facts): "task_facts"
        # {task: {role, attacker_goal_check, legitimate_note_check}} and "content_facts"
        # {content: {carries}}, so the ledger never reads today's tasks/ or conditions/.
        **grid_facts({t: inputs.tasks[t] for t in sel.tasks}, {c: inputs.content[c] for c in sel.content}),
        classification_tables=table_facts(),  # what reclassify compares against
    )
    try:
        store.create(meta.dump(), command=command)
    except OSError as exc:
        # A folder that create() made is removed again: nothing half-written.
        if store.folder.is_dir() and not store.folder.is_symlink():
            import shutil

            shutil.rmtree(store.folder, ignore_errors=True)
        raise StorageError(
            f"--out {store.folder}: cannot create the ledger folder ({exc.strerror or exc}); nothing was written"
        ) from None
    return meta


def _reopen(store: RunStore, meta: GridMeta, spec: GridSpec, settings: RunSettings, guard) -> None:
    """A resumed grid's meta.json: this invocation's guard, schedule, verify cache and limits.

    An earlier stop at budget becomes history (``budget_stops``); the limits may be new."""
    keys = spec.meta()
    meta.resumed = [*meta.resumed, now()]
    meta.resumed_commits = [*meta.resumed_commits, commit()]
    known = {f.get("sha256") for f in meta.policy_files}
    more = [f for f in registry.loaded_files() if f["path"] in spec.policies and f["sha256"] not in known]
    if more:  # files named for the first time on this resume: their models may run now
        meta.policy_files = [*meta.policy_files, *more]
        meta.policies = list(dict.fromkeys([*meta.policies, *(f["path"] for f in more)]))
    meta.guard = guard.facts()  # each run record's parity keeps the guard it ran under
    meta.schedule = settings.schedule.as_dict()
    meta.verify_cache = keys["verify_cache"]  # this invocation's
    if meta.stopped_at_budget:
        meta.budget_stops = [*meta.budget_stops, meta.stopped_at_budget]
    meta.stopped_at_budget = None
    meta.budget, meta.provider_retry = keys["budget"], keys["provider_retry"]
    write_meta(store, meta)


def _run(store: RunStore, cells: list[Cell], spec: GridSpec, settings: RunSettings, inputs, meta: GridMeta) -> int:
    """Execute what is left, then record the invocation in meta.json and render the ledger."""
    done = store.completed_ids()
    todo = sum(1 for c in cells if c.run_id not in done)
    n_cells = len({(c.task, c.content, c.swap, c.model, c.repeat) for c in cells})
    n_fw = len({c.framework for c in cells})
    print(
        f"grid {store.folder}\n  {len(cells)} runs ({n_cells} cells × {n_fw} framework{'s' if n_fw != 1 else ''}), "
        f"{len(done)} already done, {todo} to run\n  "
        f"{settings.jobs} jobs (up to {settings.max_inflight} runs in flight), isolation {spec.isolation}\n"
        + _limits_banner(spec, inputs),
        flush=True,
    )
    t0 = time.monotonic()
    try:
        report = execute(cells, store, spec, settings, inputs)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: {len(store.completed_ids())} of {len(cells)} runs recorded in "
            f"{store.folder}; `{resume_command(store, settings)}` finishes the grid"
        ) from None
    stopped = _record(store, meta, report, time.monotonic() - t0)
    if stopped is not None:
        raise StorageError(
            f"--out {store.folder}: writing the ledger failed: {stopped.strerror or stopped} "
            f"(errno {stopped.errno}); the grid stopped with {len(store.completed_ids())} of "
            f"{len(cells)} runs recorded; free space or fix permissions, then "
            f"`{resume_command(store, settings)}`"
        )
    try:
        code = finish(store)
    except OSError as exc:
        raise StorageError(
            f"--out {store.folder}: rendering the ledger failed: {exc.strerror or exc}; "
            f"free space or fix permissions, then `{resume_command(store, settings)}`"
        ) from None
    return _exit_status(store, meta, report, code, resume_command(store, settings))


def _limits_banner(spec: GridSpec, inputs: GridInputs) -> str:
    """The limits in force, per model (claimgrid.execute.model_limits): one line for the reference
    models together when they share them, one line per real model; a model the driver serves
    with its measured deadline and its server's cap, as its runs get them."""

    def in_force(m: str):
        server = inputs.served_models.get(m) or {}
        return spec.limits_for(m).served(inputs.call_deadlines.get(m), server.get("max_output_tokens"))

    models = list(dict.fromkeys(spec.selection.all_models))
    reference = [m for m in models if registry.is_reference(m)]
    lines = []
    shared = {in_force(m).model_dump_json() for m in reference}
    if reference and len(shared) == 1:
        lines.append(line(f"reference models ({len(reference)})", in_force(reference[0])))
    else:
        lines += [line(m, in_force(m)) for m in reference]
    lines += [line(m, in_force(m)) for m in models if not registry.is_reference(m)]
    return "  limits: " + "\n          ".join(lines)


def _record(store: RunStore, meta: GridMeta, report: GridReport, wall_s: float) -> OSError | None:
    """This invocation's report, spend, wall time and driver CPU into meta.json; returns the
    storage error that stopped the grid (or that stops writing meta.json), if any."""
    try:
        meta.add_report(report)
        meta.spend = report.spend
        # Finished means every cell of the grid is recorded: not after a storage error, a
        # node lost, a harness error or a budget stop (each leaves cells for --resume).
        complete = meta.grid_size is not None and len(store.completed_ids()) >= meta.grid_size
        meta.finished = now() if report.storage_error is None and complete else None
        meta.wall_s = round((meta.wall_s or 0) + wall_s, 1)
        # The driver's own CPU for this invocation (gateway thread included; read by bench/throughput.py).
        usage = resource.getrusage(resource.RUSAGE_SELF)
        meta.add_cpu("driver_self_s", usage.ru_utime + usage.ru_stime)
        write_meta(store, meta)
    except OSError as exc:
        return report.storage_error or exc
    return report.storage_error


def _exit_status(store: RunStore, meta: GridMeta, report: GridReport, code: int, resume: str) -> int:
    """0, 3 (runs lost with a node) or 1 (harness errors, a framework venv that failed to build),
    with the line that says why."""
    if meta.stopped_at_budget:
        print(stop_line(meta.stopped_at_budget, store.folder))
    if report.lost:
        print(
            f"grid incomplete: {report.lost} runs lost with their node; resume with: {resume}",
            file=sys.stderr,
        )
        return 3
    if report.venv_failures:
        names = ", ".join(f["framework"] for f in report.venv_failures)
        runs = sum(f["runs_not_started"] for f in report.venv_failures)
        print(
            f"grid.py: the venv of {names} failed to build (meta.json venv_failures); its {runs} run(s) were "
            f"not started, the other frameworks' runs are recorded; fix the build, then `{resume}` runs them",
            file=sys.stderr,
        )
    if report.harness_errors:
        print(
            f"grid.py: {len(report.harness_errors)} run(s) hit a harness error (meta.json harness_errors); "
            f"--resume {store.folder} runs them again",
            file=sys.stderr,
        )
        return code or 1
    return code or (1 if report.venv_failures else 0)


def add_parser(sub) -> None:
    """``grid.py run``: the default command; its flags in the order ``--help`` lists them."""
    run = sub.add_parser("run", help="run a grid (the default command)")
    data_opts(run)
    policies_opt(run)
    claim_judge_opt(run)
    key_opt(run)
    allow_unsealed_opt(run)
    _grid_flags(run)
    _execution_flags(run)
    _limit_flags(run)
    _backend_flags(run)
    _spend_flags(run)


def _grid_flags(sp) -> None:
    """What the grid is: the selection of frameworks, tasks, conditions and models, and the repeats."""
    sp.add_argument("--frameworks", type=V.names, help="comma-separated framework names (default: all in venvs.toml)")
    sp.add_argument(
        "--tasks", type=V.names, help="comma-separated task ids, from any suite (default: the --suite's tasks)"
    )
    sp.add_argument(
        "--suite", type=V.text, default=None, help="the tasks whose task.toml has this suite (default: 'default')"
    )
    sp.add_argument("--content", type=V.names, help="content condition names, from conditions/content/ (default: all)")
    sp.add_argument("--swap", type=V.names, help="swap condition names, from conditions/swap/ (default: all)")
    sp.add_argument(
        "--models",
        "--model",
        dest="models",
        type=V.names,
        help="reference model names or LiteLLM model strings (default: the registry's default models)",
    )
    # Grid-defining flags default to None so that --resume can tell "given" from "default";
    # claimgrid.commands.flags fills in the defaults (claimgrid.execute.spec.DEFAULT_*).
    sp.add_argument(
        "--substitute",
        type=V.text,
        help="one reference model name or LiteLLM model string: the model that serves after the assigned one "
        "becomes unavailable (default: the registry's substitute)",
    )
    sp.add_argument(
        "--repeats",
        type=V.whole(1, V.MAX_REPEATS),
        default=None,
        help=f"runs per cell, 1 to {V.MAX_REPEATS} (default: 1); the grid is at most {V.MAX_GRID:,} runs",
    )


def _execution_flags(sp) -> None:
    """How the runs execute: parallelism, connections, the timeout, the output folder, isolation, guard, resume."""
    sp.add_argument(
        "--jobs",
        type=V.whole(1, V.MAX_JOBS),
        default=None,
        help=f"runs using CPU at once, 1 to {V.MAX_JOBS} (default: number of CPUs); a run "
        "that is waiting (a fault's delay, a back-off, a provider) does not hold a job",
    )
    sp.add_argument(
        "--max-inflight",
        type=V.whole(1, V.MAX_INFLIGHT),
        default=None,
        help=f"runs in flight at all, waiting or not, 1 to {V.MAX_INFLIGHT} (default: 4 per job, "
        "and at least the grid's provider connections plus the jobs; the jobs when a local model is in the grid)",
    )
    sp.add_argument(
        "--max-connections",
        type=V.connections,
        action="append",
        default=None,
        metavar="N|PROVIDER=N",
        help="calls in flight to one real provider, N from 1 to 10000 (default 10 each); N for every provider, "
        "PROVIDER=N for one (repeatable); a call over it waits in the gateway (queued_ms in its exchange "
        "event). Reference models have no limit",
    )
    sp.add_argument(
        "--local-models",
        type=Path,
        default=None,
        metavar="FILE",
        help="the local models --models local/<name> names (default: models/local.toml; "
        "needs the extra: uv sync --extra local-model)",
    )
    sp.add_argument(
        "--model-server",
        dest="server_url",
        type=V.server_url,
        default=None,
        metavar="URL",
        help="a model server you already run (llama-server, Ollama, vLLM, LM Studio: OpenAI chat "
        "completions); --models server/<model id> names its model; its key, if it asks for one, "
        f"in ${localmodel.SERVER_KEY_ENV} (default: none: only the models the grid serves itself)",
    )
    sp.add_argument(
        "--timeout",
        type=V.seconds(V.MAX_TIMEOUT_S),
        default=None,
        help=f"seconds per run before its process group is killed, more than 0 and at most "
        f"{V.MAX_TIMEOUT_S:g}, not inf or nan; every model, over models/limits.toml "
        f"(default: {V.DEFAULT_TIMEOUT_S:g} for reference models, {V.REAL_TIMEOUT_S:g} for real ones)",
    )
    sp.add_argument(
        "--out",
        type=Path,
        default=None,
        help="new ledger folder to write, in a writable place (default: ledger/<grid id>)",
    )
    sp.add_argument(
        "--isolation",
        choices=("warm", "fresh"),
        default=None,
        help="warm: fork each run from a parent that has imported the framework; "
        "fresh: a new interpreter per run (default: warm)",
    )
    sp.add_argument(
        "--guard",
        choices=("auto", "on", "off"),
        default="auto",
        help="sandbox the agent's commands with bubblewrap: auto (default) = on where namespaces work, "
        "on = fail where they do not, off = unguarded (recorded in meta.json and every run)",
    )
    sp.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="finish an interrupted grid in DIR, a folder written by grid.py run with a readable meta.json",
    )


def _limit_flags(sp) -> None:
    """Per-run and per-call limits the gateway enforces (over models/limits.toml)."""
    sp.add_argument(
        "--max-model-calls",
        type=V.whole(1, V.MAX_MODEL_CALLS),
        default=None,
        help=f"per-run model call budget (turn limit) enforced by the gateway, 1 to {V.MAX_MODEL_CALLS}; every "
        f"model, over models/limits.toml (default: {V.DEFAULT_MAX_MODEL_CALLS} for reference models, "
        f"{V.REAL_MAX_MODEL_CALLS} for real ones)",
    )
    sp.add_argument(
        "--limits",
        type=Path,
        default=None,
        metavar="FILE",
        help='per-model limits: [models."<glob>"] tables of call_timeout_s, max_output_tokens, max_model_calls, '
        "max_run_tokens, timeout_s (default: models/limits.toml)",
    )
    sp.add_argument(
        "--call-timeout",
        type=V.seconds(V.MAX_CALL_TIMEOUT_S),
        default=None,
        metavar="S",
        help="per-call deadline in seconds: the gateway ends a real model's call that has not answered by then "
        "(recorded as a limit hit) and the adapter's client gets it too; every model, over models/limits.toml "
        f"(default: {V.REFERENCE_CALL_TIMEOUT_S:g} for reference models, {V.REAL_CALL_TIMEOUT_S:g} for real ones)",
    )
    sp.add_argument(
        "--max-output-tokens",
        type=V.whole(1, V.MAX_OUTPUT_TOKENS),
        default=None,
        metavar="N",
        help="per-call output-token cap the gateway sets on every real model call (max_tokens lowered or set; "
        f"recorded); every model, over models/limits.toml (default: {V.REAL_MAX_OUTPUT_TOKENS} for real models; "
        "reference models are not capped)",
    )
    sp.add_argument(
        "--max-run-tokens",
        type=V.whole(1, V.MAX_RUN_TOKENS),
        default=None,
        metavar="N",
        help="per-run prompt+completion token budget (provider usage): the gateway refuses the run's calls past it; "
        f"every model, over models/limits.toml (default: {V.REAL_MAX_RUN_TOKENS:,} for real models, none for reference)",
    )


def _backend_flags(sp) -> None:
    """Where the runs execute, and what the terminal and the verify cache do."""
    sp.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: run on this machine (default); ray: one node per Ray node (needs the ray extra)",
    )
    sp.add_argument(
        "--address",
        default=None,
        help="with --backend ray: the Ray cluster address (default: a cluster started on this machine with `ray start`)",
    )
    sp.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    sp.add_argument(
        "--no-verify-cache",
        action="store_true",
        help="re-run every run's tests, even where an identical final workspace was tested already "
        "(recorded in meta.json; default: a run reuses that result and its evidence names the run)",
    )


def _spend_flags(sp) -> None:
    """Real models: spend limits and provider retries (claimgrid.gateway.budget / .retry)."""
    sp.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="no new run starts once the grid's model spend reaches USD (LiteLLM prices; "
        "unpriced models count tokens only); runs in flight finish (default: no limit)",
    )
    sp.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="no new run starts once the grid's prompt+completion tokens reach N (default: no limit)",
    )
    sp.add_argument(
        "--provider-retries",
        type=int,
        default=None,
        metavar="N",
        help="retries of a real provider's transient error (429, 5xx, reset) inside the gateway (default 4)",
    )
    sp.add_argument(
        "--provider-backoff",
        type=float,
        default=None,
        metavar="S",
        help="first retry wait in seconds, doubled per retry; a longer Retry-After wins (default 1)",
    )
    sp.add_argument(
        "--provider-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds one provider attempt may take before it is abandoned and retried (default 300)",
    )
