"""A run's model limits, resolved once per model: flags over ``models/limits.toml`` over code
overrides over the defaults (claimgrid.caps, each with its reason).

The five limits: the per-call deadline (``call_timeout_s``, the gateway ends a real model's
call there and the client gets it in ``budgets.model_call_timeout_s``), the per-call output
cap (``max_output_tokens``: the gateway lowers or sets ``max_tokens`` on every real call),
the turn limit (``max_model_calls``), the run's token budget (``max_run_tokens``: prompt and
completion tokens from the provider's usage) and the run's wall time (``timeout_s``).

Reference models keep the values every reference ledger was recorded under (no output cap,
no token budget); a real model (any LiteLLM model string) gets the real-model defaults. The
order, most specific last:

1. defaults (reference or real, :func:`defaults_for`);
2. code overrides: a mapping ``{model: {field: value}}`` a driver fills before the grid (a
   local server whose measured speed sets its deadline: ``resolve(..., overrides=...)``);
3. ``models/limits.toml``: ``[models."<glob>"]`` tables of the same fields; every table whose
   glob matches the model string applies, in file order (a later table over an earlier);
4. the flags (``--call-timeout``, ``--max-output-tokens``, ``--max-model-calls``,
   ``--max-run-tokens``, ``--timeout``): every model.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from pydantic import Field

from claimgrid import ROOT, caps
from claimgrid.errors import DataError
from claimgrid.execute.spec import MAX_MODEL_CALLS, MAX_TIMEOUT_S, ModelLimits
from claimgrid.inputs.schema import Strict, load_toml, validate
from claimgrid.reference import registry

LIMITS_FILE = ROOT / "models" / "limits.toml"
FIELDS = ("call_timeout_s", "max_output_tokens", "max_model_calls", "max_run_tokens", "timeout_s")
# The flag that sets each field (README's flag table; errors name it).
FLAG = {
    "call_timeout_s": "--call-timeout",
    "max_output_tokens": "--max-output-tokens",
    "max_model_calls": "--max-model-calls",
    "max_run_tokens": "--max-run-tokens",
    "timeout_s": "--timeout",
}


# Limits set from code before a grid's spec is built: {model: {field: value}}. A driver that
# starts a model server itself (a local llama.cpp server whose measured prompt and generation
# speed give its deadline) calls ``set_override`` once it knows the values; models/limits.toml
# and the flags still win over them.
_OVERRIDES: dict[str, dict] = {}


def set_override(model: str, **values) -> None:
    """Set ``model``'s limits from code (fields of ModelLimits; checked when resolved)."""
    _check_override(model, values, "limit overrides")
    _OVERRIDES.setdefault(model, {}).update(values)


def clear_overrides() -> None:
    _OVERRIDES.clear()


def code_overrides() -> dict[str, dict]:
    """A copy of the overrides set from code."""
    return {m: dict(v) for m, v in _OVERRIDES.items()}


class _Entry(Strict):
    """One ``[models."<glob>"]`` table of models/limits.toml."""

    call_timeout_s: float | None = Field(default=None, gt=0, le=caps.MAX_CALL_TIMEOUT_S, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1, le=caps.MAX_OUTPUT_TOKENS)
    max_model_calls: int | None = Field(default=None, ge=1, le=MAX_MODEL_CALLS)
    max_run_tokens: int | None = Field(default=None, ge=1, le=caps.MAX_RUN_TOKENS)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)


class _File(Strict):
    models: dict[str, _Entry] = Field(default_factory=dict)


def defaults_for(model: str) -> dict:
    """The default limits of ``model`` (claimgrid.caps states why each is what it is)."""
    if registry.is_reference(model):
        return {
            "call_timeout_s": caps.REFERENCE_CALL_TIMEOUT_S,
            "max_output_tokens": None,
            "max_model_calls": caps.REFERENCE_MAX_MODEL_CALLS,
            "max_run_tokens": None,
            "timeout_s": caps.REFERENCE_TIMEOUT_S,
        }
    return {
        "call_timeout_s": caps.REAL_CALL_TIMEOUT_S,
        "max_output_tokens": caps.REAL_MAX_OUTPUT_TOKENS,
        "max_model_calls": caps.REAL_MAX_MODEL_CALLS,
        "max_run_tokens": caps.REAL_MAX_RUN_TOKENS,
        "timeout_s": caps.REAL_TIMEOUT_S,
    }


def load_file(path: Path | None = None) -> list[tuple[str, dict]]:
    """models/limits.toml as ``[(glob, {field: value})]`` in file order (absent file: none);
    a bad entry is one DataError naming the file and the field (``models.<glob>.<field>``)."""
    path = Path(path) if path is not None else LIMITS_FILE
    if not path.exists():
        return []
    data = validate(_File, load_toml(path), path)
    out = []
    for glob, entry in data.models.items():
        if not glob.strip():
            raise DataError(path, "models", "an empty glob matches no model string")
        out.append((glob, entry.model_dump(exclude_none=True)))
    return out


def _check_override(model: str, values: dict, where: str) -> None:
    bad = sorted(set(values) - set(FIELDS))
    if bad:
        raise DataError(where, f"{model}.{bad[0]}", f"unknown limit; allowed: {', '.join(FIELDS)}")


def resolve(
    models,
    flags: dict | None = None,
    path: Path | None = None,
    overrides: dict[str, dict] | None = None,
) -> dict[str, ModelLimits]:
    """Each model's limits: ``flags`` ({field: value}, None values left out) over the file's
    matching entries over ``overrides`` ({model: {field: value}}, from code) over the defaults.
    The result is checked as a whole: a combination out of range names where it came from."""
    file_path = Path(path) if path is not None else LIMITS_FILE
    entries = load_file(file_path)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    out: dict[str, ModelLimits] = {}
    for model in dict.fromkeys(models):
        values, source = defaults_for(model), dict.fromkeys(FIELDS, "default")
        code = (overrides or {}).get(model) or {}
        _check_override(model, code, "limit overrides")
        for key, value in code.items():
            values[key], source[key] = value, "code"
        for glob, entry in entries:
            if fnmatch.fnmatchcase(model, glob):
                for key, value in entry.items():
                    values[key], source[key] = value, f"{file_path.name}:{glob}"
        for key, value in given.items():
            values[key], source[key] = value, "flag"
        try:
            out[model] = ModelLimits(**values, source=source)
        except ValueError as exc:  # a code override out of range (the file and flags are checked as read)
            raise DataError("limit overrides", model, str(exc).splitlines()[-1].strip()) from None
    return out


def line(model: str, limits: ModelLimits) -> str:
    """The banner's line for one model: every limit in force and where it came from."""

    def show(key: str, text: str) -> str:
        src = limits.source.get(key, "default")
        return text if src == "default" else f"{text} ({src})"

    lim = limits
    parts = [
        show("call_timeout_s", f"per-call deadline {lim.call_timeout_s:g} s"),
        show(
            "max_output_tokens",
            f"output cap {lim.max_output_tokens:,} tokens/call" if lim.max_output_tokens else "no output cap",
        ),
        show("max_model_calls", f"{lim.max_model_calls} model calls/run"),
        show("max_run_tokens", f"{lim.max_run_tokens:,} tokens/run" if lim.max_run_tokens else "no token budget"),
        show("timeout_s", f"{lim.timeout_s:g} s/run"),
    ]
    return f"{model}: " + ", ".join(parts)


def from_meta(stored: dict | None) -> dict[str, ModelLimits] | None:
    """meta.json ``limits`` back as ModelLimits (None: a grid written before per-model limits)."""
    if not stored:
        return None
    return {m: ModelLimits(**v) for m, v in stored.items()}
