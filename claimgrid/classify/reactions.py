"""What a framework did with a fault, from harness evidence only (record field ``faults``).

``fault_facts(model, events, classification)`` reads the run's gateway, tools and process
events and returns::

    {"fault": "transient-500" | ... | None,   # the fault model (registered fault=True), else None
     "fault_kind": "server_error" | ... | None, # the gateway-side kind (gateway faults)
     "fault_call": 1 | None,                    # call index the gateway faulted
     "gateway_calls": 7,                        # every request that reached the gateway
     "attempts_at_fault": 2 | None,             # requests carrying the faulted call's
                                                # conversation (1 = no retry; 2 = one retry)
     "reaction": "raised" | "reported DONE" | "ended silently" | "timeout" | "crash",
     "retried": true, "raised": false, "claimed": true,
     "duplicate_side_effects": 0,               # side-effecting tool calls (write, edit,
                                                # command) executed again with identical arguments
     "handling": "executed the first only" | ..., # what it did with the probe (vocab.HANDLING)
     "handling_evidence": ["gateway call 0: ...", "tools: ..."]}  # the lines it rests on

``reaction`` is the framework's visible end: ``raised`` (its exception left ``run``),
``reported DONE`` (it went on and the agent claimed success), ``ended silently`` (no
exception, no claim), ``timeout`` / ``crash`` (process); ``retried`` is separate because a
framework can retry and then raise. Nothing here reads the agent's words except
``claimed`` (the classifier's).
"""

from __future__ import annotations

import json

from claimgrid.reference import registry, shapes, tool_faults
from claimgrid.reference.probe_kinds import ShapeKind, ToolFaultKind
from claimgrid.store.events import Events, GatewayExchange, ProcessExit, ToolCall, of_kind, parse_as, parse_events

SIDE_EFFECT_CATEGORIES = ("write", "edit", "bash")
# How much of a late tool result a later tool message must hold to show it was passed on
# (the start of the text: a framework may wrap or cut a long one).
LATE_MATCH_CHARS = 200
# Rounding of the recorded event times (4 decimals) and of the sleep; far below any delay.
CLOCK_SLACK_S = 0.01


def duplicate_side_effects(tool_events: Events) -> int:
    """Side-effecting tool executions whose (tool, arguments) an earlier one in the run had."""
    seen: set = set()
    dup = 0
    for e in parse_as(ToolCall, tool_events):
        if e.category not in SIDE_EFFECT_CATEGORIES:
            continue
        key = (e.tool, json.dumps(e.args, sort_keys=True, default=str))
        if key in seen:
            dup += 1
        seen.add(key)
    return dup


def fault_facts(model: str, events: Events, classification: dict) -> dict:
    events = parse_events(events)
    gateway = sorted(of_kind(events, GatewayExchange), key=lambda e: e.call_index or 0)
    tools = of_kind(events, ToolCall)
    process = next(iter(of_kind(events, ProcessExit)), None)
    faulted = next((e for e in gateway if e.fault), None)
    attempts = None
    if faulted is not None:
        n = faulted.messages_n
        attempts = 1
        for e in gateway[gateway.index(faulted) + 1 :]:
            if n is None or e.messages_n != n:
                break
            attempts += 1
    raised = bool(process and process.adapter_exception) or classification.get("process") == "adapter_error"
    claimed = bool(classification.get("claimed"))
    if classification.get("process") in ("timeout", "crash"):
        reaction = classification["process"]
    elif raised:
        reaction = "raised"
    elif claimed:
        reaction = "reported DONE"
    else:
        reaction = "ended silently"
    retried = bool(attempts and attempts > 1)
    handling, lines = probe_handling(model, gateway, tools, reaction)
    entry = registry.get(model)  # the registry says which models are fault models
    return {
        "fault": model if entry is not None and entry.fault else None,
        "fault_kind": entry.gateway_fault.kind if entry is not None and entry.gateway_fault is not None else None,
        "fault_call": faulted.call_index if faulted else None,
        "gateway_calls": len(gateway),
        "attempts_at_fault": attempts,
        "reaction": reaction,
        "retried": retried,
        "raised": raised,
        "claimed": claimed,
        "duplicate_side_effects": duplicate_side_effects(tools),
        "handling": handling,
        "handling_evidence": lines,
    }


def _matches(call, e: ToolCall) -> bool:
    try:
        asked = json.loads(call.arguments or "{}")
    except (TypeError, ValueError):
        return False
    return call.name == e.tool and isinstance(asked, dict) and asked == e.arg_dict


def _ran_without_extras(call, answered, tools) -> tuple[ToolCall, int, int] | None:
    """The tool-layer execution of ``call`` with only the arguments it shares with the schema
    (the framework dropped the others), with how often the tool layer ran those arguments and
    how often the model asked for them; None if there is none.

    Read from what the tool layer recorded (the call executed, with which arguments), never
    from the framework's tool message, whose shape is the framework's own (Google ADK sends
    ``{"result": "..."}``). The same arguments alone are not enough (a model asked again may
    send exactly those next, after a refusal): the tool layer must have run them more often
    than any answer of the model asked for them, so one execution came from ``call``."""
    try:
        asked = json.loads(call.arguments or "{}")
    except (TypeError, ValueError):
        return None
    if not isinstance(asked, dict):
        return None
    for e in tools:
        kept = e.arg_dict
        if e.tool != call.name or not kept or not set(kept) < set(asked) or any(asked[k] != v for k, v in kept.items()):
            continue
        ran = sum(1 for t in tools if t.tool == e.tool and t.arg_dict == kept)
        requested = sum(1 for g in answered for c in g.tool_calls or [] if _matches(c, e))
        if ran > requested:
            return e, ran, requested
    return None


def _answered(gateway) -> list[GatewayExchange]:
    return [e for e in gateway if e.status == 200]


def probe_handling(model: str, gateway, tools, reaction: str) -> tuple[str | None, list[str] | None]:
    """What the framework did with a tool-fault or output-shape probe (vocab.HANDLING) and
    the evidence lines; (None, None) for any other model. The run's end (``reaction``) stands
    in where the probe itself left no trace."""
    fault = tool_faults.tool_fault(model)
    kind = shapes.shape_of(model)
    if fault is None and kind is None:
        return None, None
    if reaction in ("timeout", "crash"):
        return reaction, [f"process: {reaction}"]
    answered = _answered(gateway)
    if fault is not None:
        return _tool_fault(answered, tools, reaction)
    return _shape(kind, answered, tools, reaction)


def _tool_fault(answered, tools, reaction) -> tuple[str, list[str]]:
    hit = next((e for e in tools if getattr(e, "fault", None)), None)
    if hit is None:
        return "fault not reached", ["tools: no call was faulted"]
    lines = [f"tools: seq {hit.seq} {hit.tool} faulted ({hit.fault}), ok={hit.ok}"]
    asked = next((g for g in answered for c in g.tool_calls or [] if _matches(c, hit)), None)
    later = [g for g in answered if asked is not None and (g.call_index or 0) > (asked.call_index or 0)]
    if asked is not None:
        lines.append(f"gateway call {asked.call_index}: asked for {hit.tool}")
    again = [e for e in tools if e is not hit and e.tool == hit.tool and e.arg_dict == hit.arg_dict]
    if reaction == "raised":
        return "raised", [*lines, "process: the adapter's exception left the run"]
    if again:
        return "retried the tool", [*lines, f"tools: seq {again[0].seq} ran the same call again"]
    if not later:
        return reaction, [*lines, "gateway: no later model call"]
    first = later[0]
    results = [r or "" for r in first.tool_results or []]
    if hit.fault == ToolFaultKind.HUGE:
        size = max(first.tool_result_chars or [len(r) for r in results] or [0])
        delivered = getattr(hit, "delivered_chars", None) or 0
        if results:
            value = "passed the whole result to the model" if size >= delivered else "cut the result before the model"
            return value, [*lines, f"gateway call {first.call_index}: longest tool message {size} of {delivered} chars"]
    elif hit.fault == ToolFaultKind.LATE:
        waited = _waited(hit, asked, first, results)
        if waited is not None:
            return "waited for the late result", [
                *lines,
                f"tools: the result was returned {hit.delayed_s} s after the call",
                waited,
            ]
    elif hit.error and any((hit.error in r) for r in results):
        return "passed the error to the model", [
            *lines,
            f"gateway call {first.call_index}: a tool message holds the error",
        ]
    return "went on to the model", [*lines, f"gateway call {first.call_index}: the model was called again"]


def _waited(hit: ToolCall, asked, first, results: list[str]) -> str | None:
    """The evidence line that the framework waited for a late result, or None.

    The result was right, only late. A later tool message holding it shows the framework
    waited for it; a framework that sends results back as text (no tool message) waited when
    its next model call came at least the delay after the call that asked for the tool (on
    the gateway's own clock: a framework that gave up at its own deadline calls sooner)."""
    text = (hit.result or "").strip()[:LATE_MATCH_CHARS]
    if text and any(text in r for r in results):
        return f"gateway call {first.call_index}: a tool message holds the result"
    delay = hit.delayed_s or 0.0
    if asked is not None and asked.t is not None and first.t is not None and delay:
        gap = first.t - asked.t
        if gap >= delay - CLOCK_SLACK_S:
            return f"gateway calls {asked.call_index} and {first.call_index}: {gap:.1f} s apart, the delay {delay} s"
    return None


def _shape(kind, answered, tools, reaction) -> tuple[str, list[str]]:
    if reaction == "raised":
        return "raised", ["process: the adapter's exception left the run"]
    if kind == ShapeKind.PARALLEL:
        multi = next((g for g in answered if len(g.tool_calls or []) > 1), None)
        if multi is None:
            return reaction, ["gateway: no multi-call answer was served"]
        ran = [any(_matches(c, e) for e in tools) for c in multi.tool_calls or []]
        value = "executed all calls" if all(ran) else "executed none" if not any(ran) else "executed the first only"
        return value, [f"gateway call {multi.call_index}: {len(ran)} tool calls", f"tools: {sum(ran)} of them executed"]
    if kind in (ShapeKind.WRONG_TYPE, ShapeKind.EXTRA_ARGS, ShapeKind.MISSING_ARGS):
        first = next((g for g in answered if g.tool_calls), None)
        if first is None:
            return reaction, ["gateway: the malformed call was not served"]
        call = (first.tool_calls or [])[0]
        reached = any(_matches(call, e) for e in tools)
        line = f"gateway call {first.call_index}: {call.name}({call.arguments})"
        if reached:
            return "passed the arguments to the tool", [line, "tools: the call reached the tool layer"]
        dropped = _ran_without_extras(call, answered, tools) if kind == ShapeKind.EXTRA_ARGS else None
        if dropped is not None:
            ran, runs, requested = dropped
            extra = sorted(set(json.loads(call.arguments or "{}")) - set(ran.arg_dict))
            return "dropped the extra arguments", [
                line,
                f"tools: seq {ran.seq} ran {ran.tool} without {', '.join(extra)}",
                f"tools: ran those arguments {runs} time(s); the model asked for them {requested} time(s)",
            ]
        if any((g.call_index or 0) > (first.call_index or 0) for g in answered):
            return "refused the arguments", [line, "tools: never executed; the model was called again"]
        return reaction, [line, "tools: never executed; no later model call"]
    if kind in (ShapeKind.REFUSAL, ShapeKind.ANNOUNCES, ShapeKind.LENGTH_CUT):
        text = next(
            (g for g in answered if not g.tool_calls and (kind != ShapeKind.LENGTH_CUT or g.finish_reason == "length")),
            None,
        )
        if text is None:
            return reaction, ["gateway: the text-only answer was not served"]
        line = f"gateway call {text.call_index}: a text-only answer (finish_reason {text.finish_reason})"
        if any((g.call_index or 0) > (text.call_index or 0) for g in answered):
            return "asked the model again", [line, "gateway: a later model call"]
        return "took the text as the final answer", [line, "gateway: no later model call"]
    if kind == ShapeKind.FINAL_THEN_CALL:
        final = next((g for g in answered if g.content and g.tool_calls), None)
        if final is None:
            return reaction, ["gateway: the final answer with a call was not served"]
        call = (final.tool_calls or [])[0]
        line = f"gateway call {final.call_index}: final text beside {call.name}"
        if any(_matches(call, e) for e in tools):
            return "executed the call after the final answer", [line, f"tools: {call.name} executed"]
        return "ended on the final answer", [line, "gateway: no later model call"]
    return reaction, [f"run: {reaction}"]
