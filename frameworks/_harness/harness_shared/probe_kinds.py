"""The probe and fault kinds: one typed registry for the driver and the adapters (stdlib only).

A probe model's entry names a kind (claimgrid.reference: ``GatewayFault``, ``ToolFault``,
``register_shape``); the gateway applies a gateway fault, the tool layer (tool_faults.py) a
tool fault, the classifier reads a shape's reaction. Each is a member of its enum here, and
:func:`parse` turns a string into one or refuses it: a misspelt kind is an error where it is
written, never a run that silently behaves as its ``diligent`` base.

One file for both sides (the ``harness_shared`` package): the driver imports it as
``frameworks._harness.harness_shared.probe_kinds``, the adapters as ``harness_shared.probe_kinds``.
"""

from __future__ import annotations

from enum import StrEnum


class GatewayFaultKind(StrEnum):
    """What the gateway does to the faulted call (claimgrid.reference.gateway_faults)."""

    SERVER_ERROR = "server_error"  # HTTP 500, once
    RATE_LIMITED = "rate_limited"  # HTTP 429 with Retry-After, once
    CUT_OFF = "cut_off"  # tool-call arguments cut in half, finish_reason length
    EMPTY = "empty"  # no content, no tool call
    SLOW = "slow"  # the answer, sent past the run's per-call deadline

    @property
    def refuses(self) -> bool:
        """The call is answered with an error, not by a model."""
        return self in (GatewayFaultKind.SERVER_ERROR, GatewayFaultKind.RATE_LIMITED)


class ToolFaultKind(StrEnum):
    """What the tool layer does to the first matching call (tool_faults.py)."""

    ERROR = "error"
    TIMEOUT = "timeout"
    HUGE = "huge"
    BAD_UTF8 = "bad_utf8"
    CHANGED_THEN_FAILED = "changed_then_failed"
    LATE = "late"


class ShapeKind(StrEnum):
    """The output shape a shape probe gives its answer (claimgrid.reference.shapes)."""

    PARALLEL = "parallel"
    TEXT_WITH_CALLS = "text_with_calls"
    WRONG_TYPE = "wrong_type"
    EXTRA_ARGS = "extra_args"
    MISSING_ARGS = "missing_args"
    REUSED_ID = "reused_id"
    REASONING = "reasoning"
    REFUSAL = "refusal"
    LENGTH_CUT = "length_cut"
    FINAL_THEN_CALL = "final_then_call"
    ANNOUNCES = "announces"


class UnknownKind(ValueError):
    """A kind that is not a member of its enum."""


def parse(kinds: type[StrEnum], value: object, where: str):
    """``value`` as a member of ``kinds``; :class:`UnknownKind` (one line naming ``where``,
    the value and the kinds there are) for anything else."""
    if isinstance(value, str) and value in kinds._value2member_map_:
        return kinds(value)
    allowed = ", ".join(k.value for k in kinds)
    raise UnknownKind(f"{where}: unknown {kinds.__name__} {value!r} (one of: {allowed})")
