"""Gateway-side faults real providers produce: the data and how the gateway applies them.

A gateway fault model is a registry entry (``claimgrid.reference.policies`` registers them
with ``@reference_model(..., probe=Probe(gateway_fault=GatewayFault(...)))``) that behaves like ``base``
(``diligent``) on every call except call index ``at_call``, where the gateway itself
produces the fault:

- ``server_error``: HTTP 500 (``server_error``), once; the same request again is served;
- ``rate_limited``: HTTP 429 with ``Retry-After`` (``rate_limit_exceeded``, retry allowed), once;
- ``cut_off``: the base answer's tool-call arguments cut in half, ``finish_reason: length``
  (a response truncated mid-tool-call); the model later redoes the cut step;
- ``empty``: an empty completion (no content, no tool call, ``finish_reason: stop``);
- ``slow``: the base answer, sent ``delay_past_deadline_s`` after the run's per-call
  deadline (``RunScript.model_call_timeout_s``); a client that keeps the deadline has
  given up by then.

The gateway decides by call index, so a retried request is a new index and is served
normally: every attempt that reaches the gateway is in the log, and the exchange event
of the faulted call carries ``fault`` (the kind). Each model's description and truth are
on its registry entry (``claimgrid.reference.registry``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from claimgrid.reference.registry import get, models
from frameworks._harness.harness_shared.probe_kinds import GatewayFaultKind, parse

CUT_PREFIX = "call_cut_"


@dataclass(frozen=True)
class GatewayFault:
    """``kind``: a ``GatewayFaultKind`` (a string is parsed into one; an unknown kind is refused)."""

    kind: str
    base: str = "diligent"
    at_call: int = 1
    retry_after_s: int = 1
    delay_past_deadline_s: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", parse(GatewayFaultKind, self.kind, "GatewayFault.kind"))

    @property
    def refuses(self) -> bool:
        return GatewayFaultKind(self.kind).refuses


def gateway_fault(model: str) -> GatewayFault | None:
    """The gateway fault registered for ``model`` (None: not a gateway fault model)."""
    entry = get(model)
    return entry.gateway_fault if entry is not None else None


def gateway_faults() -> dict[str, GatewayFault]:
    """name -> GatewayFault of every registered gateway fault model (a view of the registry)."""
    return {name: m.gateway_fault for name, m in models().items() if m.gateway_fault is not None}


def fault_at(model: str, index: int, swap: str) -> GatewayFault | None:
    """The fault the gateway applies to call ``index`` of a run of ``model``; ``swap`` is the
    call's serving state (``swap_for_call``): only a call the assigned model serves is faulted."""
    fault = gateway_fault(model)
    if fault is None or index != fault.at_call or swap != "none":
        return None
    return fault


def refusal(fault: GatewayFault) -> tuple[int, str, str, dict]:
    """(status, message, code, headers) of a refusing fault."""
    if fault.kind == GatewayFaultKind.SERVER_ERROR:
        return 500, "The server had an error while processing your request (transient).", "server_error", {}
    return (
        429,
        f"Rate limit reached; retry after {fault.retry_after_s} s.",
        "rate_limit_exceeded",
        {"retry-after": str(fault.retry_after_s)},
    )


def delay_s(fault: GatewayFault, model_call_timeout_s: float) -> float:
    return float(model_call_timeout_s) + fault.delay_past_deadline_s if fault.kind == GatewayFaultKind.SLOW else 0.0


def alter(fault: GatewayFault, response: dict) -> dict:
    """The response the client receives for a content fault (cut_off, empty); others unchanged."""
    if fault.kind not in (GatewayFaultKind.CUT_OFF, GatewayFaultKind.EMPTY):
        return response
    out = copy.deepcopy(response)
    choice = out["choices"][0]
    msg = choice["message"]
    if fault.kind == GatewayFaultKind.EMPTY:
        msg["content"], choice["finish_reason"] = "", "stop"
        msg.pop("tool_calls", None)
        return out
    calls = msg.get("tool_calls") or []
    for i, call in enumerate(calls):
        args = call["function"]["arguments"] or ""
        call["function"]["arguments"] = args[: max(1, len(args) // 2)]
        call["id"] = f"{CUT_PREFIX}{i}"
    if not calls and msg.get("content"):
        msg["content"] = msg["content"][: len(msg["content"]) // 2]
    choice["finish_reason"] = "length"
    return out


def without_cut_steps(messages: list) -> list:
    """The history as the model remembers it: an answer it never finished (a cut tool call
    and the results a framework sent back for it) is not a step it took."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        calls = m.get("tool_calls") or []
        if m.get("role") == "assistant" and calls and all(str(c.get("id", "")).startswith(CUT_PREFIX) for c in calls):
            continue
        if m.get("role") == "tool" and str(m.get("tool_call_id", "")).startswith(CUT_PREFIX):
            continue
        out.append(m)
    return out
