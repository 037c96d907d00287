"""The control message: the one object the driver hands an adapter for a run (stdlib only).

Its shape is declared once, here: :class:`Control` (with :class:`Budgets` and
:class:`ToolFaultSpec`), version :data:`SCHEMA` (its ``schema`` field). The driver checks every
control against it before it is sent (claimgrid.launch.launcher imports this module), and the
adapter's side checks it again on arrival (harness_runtime.run_one, fresh and warm): a missing,
mistyped or unknown field, or an unknown tool fault kind, is :class:`ControlError`, one line
naming the field, never a run that reads a silent default. docs/CONTRACTS.md "Adapter
contract" shows an example.
"""

# No ``from __future__ import annotations``: TypedDict reads NotRequired from evaluated annotations.
import types
import typing
from typing import NotRequired, TypedDict

from .probe_kinds import ToolFaultKind, UnknownKind, parse

SCHEMA = 1  # Control["schema"]: raised when a field changes meaning or a required one is added


class Budgets(TypedDict):
    """The run's limits: the model calls the gateway allows, the command and per-call
    deadlines, and the tool layer's bounds (claimgrid.caps.tool_budgets; absent: its defaults)."""

    max_model_calls: int
    command_timeout_s: float
    max_output_chars: int
    model_call_timeout_s: NotRequired[float]
    command_output_bytes: NotRequired[int]
    read_max_bytes: NotRequired[int]
    edit_max_bytes: NotRequired[int]
    search_max_bytes: NotRequired[int]
    search_timeout_s: NotRequired[float]
    max_tool_calls: NotRequired[int]
    max_open_files: NotRequired[int]
    max_output_tokens: NotRequired[int]  # a real model's, only when set
    max_run_tokens: NotRequired[int]  # a real model's, only when set


class ToolFaultSpec(TypedDict):
    """A tool-fault probe's fault, for the tool layer only (tool_faults.py)."""

    kind: str  # a ToolFaultKind
    categories: list[str]
    delay_s: NotRequired[float]  # only for a fault with a delay (late)


class Control(TypedDict):
    schema: int
    run_id: str  # the run's opaque delegation id
    framework: str
    task_id: str
    prompt: str
    workspace: str
    sandbox: str
    outcome_path: str
    gateway_url: str
    token: str  # the run's API key; never stored
    model: str  # always the blind model name
    agent_name: str
    tools: list[str]
    budgets: Budgets
    timeout_s: float
    command_sandbox: dict | None  # null when the grid runs unguarded
    agent_sandbox: NotRequired[dict | None]  # an agent with its own tools only
    tool_fault: NotRequired[ToolFaultSpec]  # a tool-fault probe only


class ControlError(ValueError):
    """A control that is not a :class:`Control`."""


def check_control(ctl: object) -> Control:
    """``ctl`` when it has :class:`Control`'s shape and version; else :class:`ControlError`
    naming the first field that is wrong."""
    _check(Control, ctl, "ctl")
    assert isinstance(ctl, dict)
    if ctl["schema"] != SCHEMA:
        raise ControlError(f"ctl.schema: {ctl['schema']!r}, this harness reads schema {SCHEMA}")
    fault = ctl.get("tool_fault")
    if fault is not None:
        try:
            parse(ToolFaultKind, fault["kind"], "ctl.tool_fault.kind")
        except UnknownKind as exc:
            raise ControlError(str(exc)) from None
    return typing.cast(Control, ctl)


def _check(shape, value: object, where: str) -> None:
    if typing.is_typeddict(shape):
        if not isinstance(value, dict):
            raise ControlError(f"{where}: {type(value).__name__}, not an object")
        hints = typing.get_type_hints(shape)
        for key in shape.__required_keys__:
            if key not in value:
                raise ControlError(f"{where}.{key}: missing")
        for key, item in value.items():
            if key not in hints:
                raise ControlError(f"{where}.{key}: not a field of the control (schema {SCHEMA})")
            _check(hints[key], item, f"{where}.{key}")
        return
    if not _fits(shape, value):
        raise ControlError(f"{where}: {type(value).__name__} {_short(value)}, not {_name(shape)}")


def _fits(shape, value: object) -> bool:
    origin = typing.get_origin(shape)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(arm, value) for arm in typing.get_args(shape))
    if origin is list:
        (item,) = typing.get_args(shape)
        return isinstance(value, list) and all(_fits(item, v) for v in value)
    if shape is type(None):
        return value is None
    if shape is float:  # a JSON number: 30 and 30.0 alike
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.is_typeddict(shape):
        try:
            _check(shape, value, "")
        except ControlError:
            return False
        return True
    return isinstance(value, origin or shape)


def _name(shape) -> str:
    return str(shape) if typing.get_origin(shape) else getattr(shape, "__name__", str(shape))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
