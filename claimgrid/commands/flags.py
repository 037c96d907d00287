"""``grid.py run``'s flags into the typed grid shapes (claimgrid.execute.spec): the only place
a command line's Namespace becomes a ``GridSpec`` or ``RunSettings``.

Grid-defining flags parse to None when left out, so that ``--resume`` can tell "given" from
"default": a new grid fills in the defaults, a resumed one the stored values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from claimgrid.errors import ClaimgridError, DataError, UnknownNameError
from claimgrid.execute import model_limits as limits
from claimgrid.execute.admission import schedule_from
from claimgrid.execute.model_limits import FLAG
from claimgrid.execute.spec import (
    DEFAULT_ISOLATION,
    DEFAULT_MAX_MODEL_CALLS,
    DEFAULT_REPEATS,
    DEFAULT_SUITE,
    DEFAULT_TIMEOUT_S,
    Budget,
    DataDirs,
    GridSpec,
    ProviderRetry,
    RunSettings,
    Selection,
)
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks, select
from claimgrid.inputs.venvs import default_frameworks, load_venvs
from claimgrid.reference import registry

# Each field of GridSpec that a flag sets: (argparse dest, flag). Dotted: inside the selection.
SPEC_FLAGS: dict[str, tuple[str, str]] = {
    "selection.frameworks": ("frameworks", "--frameworks"),
    "selection.tasks": ("tasks", "--tasks"),
    "selection.content": ("content", "--content"),
    "selection.swap": ("swap", "--swap"),
    "selection.models": ("models", "--models"),
    "selection.substitute": ("substitute", "--substitute"),
    "selection.repeats": ("repeats", "--repeats"),
    "selection.suite": ("suite", "--suite"),
    "timeout_s": ("timeout", "--timeout"),
    "isolation": ("isolation", "--isolation"),
    "max_model_calls": ("max_model_calls", "--max-model-calls"),
}


@dataclass(frozen=True)
class Data:
    """What the data flags name: tasks, content and swap conditions, framework entries."""

    tasks: dict
    content: dict
    swap: dict
    venvs: dict


def load_data(args) -> Data:
    """``--tasks-dir``, ``--conditions-dir`` and ``--venvs``, loaded (each checked as it loads)."""
    return Data(
        load_tasks(args.tasks_dir),
        load_content_conditions(args.conditions_dir),
        load_swap_conditions(args.conditions_dir),
        load_venvs(args.venvs),
    )


def given(args) -> dict[str, object]:
    """The grid-defining flags given on the command line, by GridSpec field (dotted)."""
    out = {}
    for name, (dest, _flag) in SPEC_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            out[name] = value
    return out


def check_models(models: list[str]) -> None:
    """A model is a reference model name or a LiteLLM model string (provider/model)."""
    for m in models:
        if not registry.is_reference(m) and "/" not in m:
            raise UnknownNameError(
                "model", m, list(registry.models()) + ["<provider>/<model> (any LiteLLM model string)"]
            )


def selection(args, tasks: dict, content: dict, swap: dict, venvs: dict) -> Selection:
    """A new grid's selection: the flags given, the registries' names for the rest."""

    def pick(values, names, kind):
        if not values:
            return list(names)
        select(names, values, kind)
        return list(values)

    models = args.models or registry.default_models()
    substitute = args.substitute or registry.default_substitute()
    check_models(models + [substitute])
    suite = getattr(args, "suite", None) or DEFAULT_SUITE
    if not args.frameworks and not default_frameworks(venvs):
        raise DataError(
            args.venvs, "frameworks", "every entry has default = false: name the ones to run with --frameworks"
        )
    return Selection(
        # --frameworks names any entry; without it, the default matrix's (venvs.toml ``default``).
        frameworks=pick(args.frameworks, venvs if args.frameworks else default_frameworks(venvs), "framework"),
        # --tasks names tasks from any suite; without it, the --suite's tasks.
        tasks=pick(args.tasks, tasks if args.tasks else in_suite(tasks, suite), "task"),
        content=pick(args.content, content, "content condition"),
        swap=pick(args.swap, swap, "swap condition"),
        models=models,
        substitute=substitute,
        repeats=args.repeats or DEFAULT_REPEATS,
        suite=suite,
    )


def budget(args, stored: Budget | None = None) -> Budget:
    """The grid's spend limits: the flags, else (on --resume) the limits the grid had."""
    old = stored or Budget()
    max_cost = args.max_cost if args.max_cost is not None else old.max_cost_usd
    max_tokens = args.max_tokens if args.max_tokens is not None else old.max_tokens
    if max_cost is not None and max_cost <= 0:
        raise ClaimgridError("--max-cost must be a positive number of US dollars")
    if max_tokens is not None and max_tokens <= 0:
        raise ClaimgridError("--max-tokens must be a positive number of tokens")
    return Budget(max_cost_usd=max_cost, max_tokens=max_tokens)


def provider_retry(args, stored: ProviderRetry | None = None) -> ProviderRetry:
    """The provider retry policy: the flags, else (on --resume) the grid's, else the defaults."""
    old = stored or ProviderRetry()
    retries = args.provider_retries if args.provider_retries is not None else old.retries
    backoff = args.provider_backoff if args.provider_backoff is not None else old.backoff_s
    if retries < 0:
        raise ClaimgridError("--provider-retries must be 0 or more")
    if backoff < 0:
        raise ClaimgridError("--provider-backoff must be 0 or more seconds")
    timeout = args.provider_timeout if args.provider_timeout is not None else old.timeout_s
    if timeout <= 0:
        raise ClaimgridError("--provider-timeout must be a positive number of seconds")
    return ProviderRetry(retries=retries, backoff_s=backoff, timeout_s=timeout)


def data_dirs(args) -> DataDirs:
    return DataDirs(tasks_dir=str(args.tasks_dir), conditions_dir=str(args.conditions_dir), venvs=str(args.venvs))


def policy_files(args) -> tuple[str, ...]:
    """``--policies`` files (absolute), as given: the only policy files a command loads (a
    resumed grid's recorded ones must be among them, by sha256: ``registry.load_recorded``)."""
    return tuple(dict.fromkeys(str(Path(p).resolve()) for p in args.policies))


def limit_flags(args) -> dict:
    """The per-model limit flags given ({ModelLimits field: value}; left out: not given)."""
    values = {
        "call_timeout_s": getattr(args, "call_timeout", None),
        "max_output_tokens": getattr(args, "max_output_tokens", None),
        "max_model_calls": getattr(args, "max_model_calls", None),
        "max_run_tokens": getattr(args, "max_run_tokens", None),
        "timeout_s": getattr(args, "timeout", None),
    }
    return {k: v for k, v in values.items() if v is not None}


def model_limits(args, sel: Selection) -> dict:
    """Each model's limits, resolved once (claimgrid.execute.model_limits: flags over models/limits.toml
    over code overrides over the defaults)."""
    path = getattr(args, "limits", None)
    return limits.resolve(sel.all_models, limit_flags(args), path=path, overrides=limits.code_overrides())


def new_spec(args, sel: Selection) -> GridSpec:
    """A new grid's spec: ``sel`` and the flags, defaults for what was left out."""
    return GridSpec(
        limits=model_limits(args, sel),
        selection=sel,
        timeout_s=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S,
        isolation=args.isolation or DEFAULT_ISOLATION,
        max_model_calls=args.max_model_calls if args.max_model_calls is not None else DEFAULT_MAX_MODEL_CALLS,
        guard_mode=args.guard,
        policies=policy_files(args),
        verify_cache=not args.no_verify_cache,
        budget=budget(args),
        provider_retry=provider_retry(args),
        data=data_dirs(args),
    )


def resumed_spec(args, stored: GridSpec) -> GridSpec:
    """The spec the flags ask for on ``--resume``: the stored one with every given flag
    applied (``GridSpec.differs_from`` then tells which of them a resume may not change)."""
    _check_resumed_limits(args, stored)
    sel = stored.selection.model_dump()
    top = {}
    for name, value in given(args).items():
        if name.startswith("selection."):
            sel[name.removeprefix("selection.")] = value
        else:
            top[name] = value
    return stored.model_copy(
        update={
            "selection": Selection(**sel),
            **top,
            "guard_mode": args.guard,
            "policies": policy_files(args),
            "verify_cache": not args.no_verify_cache,
            "budget": budget(args, stored.budget),
            "provider_retry": provider_retry(args, stored.provider_retry),
            "data": data_dirs(args),
        }
    )


def _check_resumed_limits(args, stored: GridSpec) -> None:
    """A limit flag given on --resume must be the stored grid's for every model (a resume
    finishes the grid as it was started); --timeout and --max-model-calls are checked as spec fields."""
    for key, value in limit_flags(args).items():
        if key in ("timeout_s", "max_model_calls") or not stored.limits:
            continue
        for model, lim in stored.limits.items():
            if getattr(lim, key) != value:
                raise ClaimgridError(
                    f"{FLAG[key]} {value:g} differs from the stored grid's {getattr(lim, key)} for {model}; "
                    f"--resume finishes the grid as it was started: drop {FLAG[key]}, or start a new grid"
                )


def run_settings(args, meta: dict | None, models: list[str]) -> RunSettings:
    """How this invocation runs: the flags, else (``--resume``) the grid's recorded schedule."""
    schedule = schedule_from(args.jobs, args.max_inflight, args.max_connections, meta, models)
    return RunSettings(
        jobs=schedule.jobs,
        max_inflight=schedule.max_inflight,
        connections_default=schedule.connections_default,
        connections=schedule.connections,
        backend=args.backend,
        address=args.address,
        node_jobs=args.jobs,
        node_max_inflight=args.max_inflight,
        progress=not args.no_progress,
        claim_judge=getattr(args, "claim_judge", None),
    )
