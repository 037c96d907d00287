"""The conformance rule "each failure is recorded once", on one run's events (shared by the
conformance suite and the test that shows the rule failing on a faulty adapter)."""

from __future__ import annotations


def _observed_failures(events: list[dict]) -> int:
    """Failures the harness itself saw in the run: gateway exchanges refused or faulted, tool
    calls the tool layer failed."""
    gateway = sum(
        1
        for e in events
        if e.get("source") == "gateway" and e.get("kind") == "exchange" and (e.get("status") != 200 or e.get("fault"))
    )
    tools = sum(
        1 for e in events if e.get("source") == "tools" and e.get("kind") == "tool_call" and e.get("ok") is False
    )
    return gateway + tools


def duplicate_errors(events: list[dict]) -> list[str]:
    """The runtime ``error`` events that record one failure more than once, as lines (none: the
    rule holds).

    A streak of consecutive runtime ``error`` events (no other runtime event between them) with
    the same type and message is one failure recorded again, unless the harness saw at least
    as many failures in the run: a framework that retries a refused call reports each refusal,
    and each refusal is a gateway exchange. An adapter that records the failure its framework
    reported and again when the framework raises it (ADK 2.x does both) has two events for one
    failure the harness saw once."""
    observed = _observed_failures(events)
    problems, streak, last = [], 0, None
    for e in (e for e in events if e.get("source") == "runtime"):
        key = (e.get("type"), e.get("message")) if e.get("kind") == "error" else None
        streak = streak + 1 if key is not None and key == last else int(key is not None)
        last = key
        if streak > 1 and streak > observed:
            problems.append(
                f"runtime error {key[0]}: {str(key[1])[:120]!r} recorded {streak} times in a row; "
                f"the harness saw {observed} failure(s)"
            )
    return problems
