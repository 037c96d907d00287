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
     "duplicate_side_effects": 0}               # side-effecting tool calls (write, edit,
                                                # command) executed again with identical arguments

``reaction`` is the framework's visible end: ``raised`` (its exception left ``run``),
``reported DONE`` (it went on and the agent claimed success), ``ended silently`` (no
exception, no claim), ``timeout`` / ``crash`` (process); ``retried`` is separate because a
framework can retry and then raise. Nothing here reads the agent's words except
``claimed`` (the classifier's).
"""

from __future__ import annotations

import json

from claimgrid.reference import registry
from claimgrid.store.events import Events, GatewayExchange, ProcessExit, ToolCall, of_kind, parse_as, parse_events

SIDE_EFFECT_CATEGORIES = ("write", "edit", "bash")


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
    }
