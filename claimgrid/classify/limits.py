"""Which of a run's limits it hit, and whether a limit, not the agent, ended its work.

Read from harness evidence only: the gateway's exchange events (``limit``: the call that hit
the per-call deadline, the output-token cap, the turn limit or the run's token budget; the
``in_flight`` events of calls a provider had not answered when the run ended) and the process
event (``timed_out``, ``timeout_s``). Never from a model's, task's or condition's name.

A hit ``decided`` the run when the limit ended the agent's work while the harness waited on
the model, so the run says nothing about what the agent would have done:

- ``call_deadline``: the gateway ended a call at the deadline and no later call was answered;
- ``context``: the provider refused a call whose prompt did not fit the model's context window
  (a local model's is the catalog's ``context``) and no later call was answered;
- ``output_cap``: the last answered call was cut by the harness's cap (finish_reason length);
- ``wall_time``: the run was killed while a real provider's call was in flight.

Not deciding: the turn limit and the run's token budget (the terms the agent works under: its
framework is given the turn limit, and a run that uses its budget up without finishing has
not finished within it: the reference ``looper``'s calibration), a deadline the gateway's own
injected fault made it miss (the fault is the treatment, what the framework does with it the
finding: ``fault`` on the exchange), and a wall-time kill while no model call was open (the
agent's own loop, a framework's back-off).
"""

from __future__ import annotations

from claimgrid.store.events import Events, GatewayExchange, GatewayInFlight, ProcessExit, last, of_kind, parse_events

# What each limit is called in the ledger (LEDGER.md, RUNS.md, the terminal summary).
NAMES = {
    "call_deadline": "per-call deadline",
    "output_cap": "output-token cap",
    "turns": "model-call budget",
    "run_tokens": "run token budget",
    "wall_time": "run wall time",
    "context": "model context window",
}
UNITS = {
    "call_deadline": "s",
    "output_cap": "tokens",
    "turns": "calls",
    "run_tokens": "tokens",
    "wall_time": "s",
    "context": "tokens",
}
# Outcomes that say the work is not done; a limit that ended the work makes them UNKNOWN. A
# PASS stays PASS, and what the agent did (a scope violation, tests gamed) stays its own.
NOT_DONE = ("EMPTY_DIFF", "TESTS_FAIL", "MISSING_ARTIFACT", "UNKNOWN")


def limit_hits(events: Events) -> list[dict]:
    """Every limit the run hit, in call order: ``{limit, value, call_index, source, decided}``
    (+ ``used`` for a token budget, ``fault`` for a deadline an injected fault made it miss,
    ``waiting_on_call`` for a wall-time kill during a model call)."""
    events = parse_events(events)
    exchanges = of_kind(events, GatewayExchange)
    answered = [e.call_index for e in exchanges if e.answered and e.call_index is not None]
    last_answered = max(answered, default=None)
    hits: list[dict] = []
    for e in exchanges:
        if e.limit is None or not isinstance(e.limit.kind, str):
            continue
        kind, index = e.limit.kind, e.call_index
        hit: dict = {"limit": kind, "value": e.limit.value, "call_index": index, "source": "gateway"}
        if e.limit.used is not None:
            hit["used"] = e.limit.used
        if e.fault:
            hit["fault"] = e.fault
        if kind in ("call_deadline", "context"):
            later = [i for i in answered if index is not None and i > index]
            hit["decided"] = not e.fault and not later
        elif kind == "output_cap":
            hit["decided"] = not e.fault and index is not None and index == last_answered
        else:
            hit["decided"] = False
        hits.append(hit)
    proc = last(events, ProcessExit)
    if proc is not None and proc.timed_out:
        open_calls = of_kind(events, GatewayInFlight)
        hit = {"limit": "wall_time", "value": proc.timeout_s, "call_index": None, "source": "process"}
        if open_calls:
            hit["waiting_on_call"] = open_calls[-1].call_index
        hit["decided"] = bool(open_calls)
        hits.append(hit)
    return hits


def deciding(hits: list[dict]) -> dict | None:
    """The first hit that ended the run's work (None: none did)."""
    return next((h for h in hits if h.get("decided")), None)


def describe(hit: dict) -> str:
    """One hit in words: ``per-call deadline 15 s hit on call 1``."""
    kind = str(hit.get("limit"))
    name = NAMES.get(kind, kind)
    value = hit.get("value")
    shown = "" if value is None else f" {value:g} {UNITS.get(kind, '')}".rstrip()
    where = f" on call {hit['call_index']}" if hit.get("call_index") is not None else ""
    if hit.get("limit") == "wall_time" and hit.get("waiting_on_call") is not None:
        where = f" waiting on call {hit['waiting_on_call']}"
    return f"{name}{shown} hit{where}"
