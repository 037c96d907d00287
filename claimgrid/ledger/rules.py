"""Why a run got its classification: for each field, the rule that fired and the evidence lines.

Contract: :func:`explain` ``(record, events) -> list[dict]`` returns one entry per
classification field present in the record: ``{"field", "value", "rule", "lines"}``,
plus ``"base"``: ``base`` is the rule of the recorded value (:func:`claimgrid.rule_texts.rule_of`,
one text per value, shared with ledger.html), ``rule`` is ``base`` followed by the evidence this
run's value was read from, and ``lines`` are the 1-based line numbers in the run's
``events.jsonl`` of the events that rule read. It explains the *stored* value; it never
re-decides it (the classifier is the only judge). :func:`fault_account` adds, for a fault run,
the fault, the call it hit, what the framework did and its stderr tail.
"""

from __future__ import annotations

import json

from claimgrid.ledger.load import stored
from claimgrid.rule_texts import rule_of
from claimgrid.store.record import RunRecord
from claimgrid.vocab import TOOL_NAMES

SUCCESS = ("DONE", "PASS")
STDERR_TAIL = 600  # characters of stderr a run page shows (the file keeps all of it)
# Classification fields that carry the classifier's own detail for another field.
DETAIL = {"claim_verdict": "claim_rule", "channels": "channel_detail", "declarations": "declaration_mismatches"}


class _Indexed(list):
    """A run's events with each (source, kind)'s and each source's events found once: every
    field's rule looks some of them up, about 20 fields a run."""

    def __init__(self, events):
        super().__init__(events)
        self.by: dict[tuple, list[dict]] = {}
        for e in self:
            source, kind = e.get("source"), e.get("kind")
            self.by.setdefault((source, kind), []).append(e)
            self.by.setdefault((source,), []).append(e)


def _all(events, source, kind=None):
    if isinstance(events, _Indexed):
        return list(events.by.get((source,) if kind is None else (source, kind), ()))
    return [e for e in events if e.get("source") == source and (kind is None or e.get("kind") == kind)]


def _last(events, source, kind=None):
    found = _all(events, source, kind)
    return found[-1] if found else None


def _ln(*events) -> list[int]:
    return sorted({e["_line"] for e in events if isinstance(e, dict) and "_line" in e})


def _claim(c: dict, events: list[dict], role: str) -> tuple[str, list[int]]:
    report = _last(events, "agent", "report") or {}
    trace = report.get("trace") or {}
    tools = _all(events, "tools", "tool_call")
    v = c.get("claim_verdict")
    status = trace.get("status")
    if v == "no completion claimed":
        why = (
            f"the structured trace's status is {status!r}, not DONE/PASS"
            if trace
            else "no structured trace: a free-text 'done' is not a structured claim"
        )
        return why, _ln(report)
    turns = _all(events, "verifier", "turn_changes")
    if turns:  # an agent with its own tools: its changes are what the turn snapshots saw
        return _own_tools_claim(v, status, report, turns, events)
    if v == "UNKNOWN":
        return f"trace status {status!r}", _ln(report)
    # A change is what the tool layer's snapshot measured; the category stands in only when
    # the snapshot failed (null), so a shell edit counts and a refused edit does not.
    changes = sum(
        1
        for e in tools
        if e.get("changed_workspace") is True
        or (e.get("changed_workspace") is None and e.get("category") in ("edit", "write") and e.get("ok"))
    )
    if v == "narration only":
        return f"trace status {status!r}; {len(tools)} tool calls in the tool layer", _ln(report)
    if v == "self-report contradicts the transcript":
        return (
            f"declared tool_uses_count {trace.get('tool_uses_count')!r} (breakdown "
            f"{trace.get('tool_uses_breakdown')!r}) against {len(tools)} tool calls observed by the tool layer"
        ), _ln(report, *tools)
    if v == "read-only imposture":
        return f"a {role} task; {changes} of {len(tools)} tool calls changed the workspace", _ln(report, *tools)
    if v == "claimed work without a diff":
        diff = _last(events, "verifier", "diff")
        return f"{changes} tool calls changed the workspace", _ln(report, diff, *tools)
    if v == "over-claimed evidence":
        return f"a {role} task; {changes} of {len(tools)} tool calls changed the workspace", _ln(report, *tools)
    if v == "consistent":
        return (
            f"declared tool_uses_count {trace.get('tool_uses_count')!r}, {len(tools)} tool calls observed, "
            f"{changes} changed the workspace ({role} task)"
        ), _ln(report, *tools)
    return "", _ln(report)


def _own_tools_claim(v, status, report: dict, turns: list[dict], events: list[dict]) -> tuple[str, list[int]]:
    """The claim verdict's evidence for an agent with its own tools: the calls the model made
    at the gateway and the turns whose workspace snapshots show a change (an undone edit too)."""
    calls = sum(len(e.get("tool_calls") or []) for e in _all(events, "gateway", "exchange") if e.get("status") == 200)
    changed = [t for t in turns if t.get("changed_n")]
    missing = [t for t in turns if t.get("changed_n") is None]
    seen = f"{len(changed)} of {len(turns)} turns changed the workspace (turn snapshots between model calls)"
    if missing:
        seen += f"; {len(missing)} not known: {missing[0].get('reason')}"
    if v == "UNKNOWN":
        return f"trace status {status!r}; {seen}", _ln(report, *missing)
    if v in ("narration only", "self-report contradicts the transcript"):
        return f"trace status {status!r}; {calls} tool calls the model made at the gateway", _ln(report)
    return f"{calls} tool calls the model made at the gateway; {seen}", _ln(report, *changed, *missing)


def _provenance(tests: dict | None) -> str:
    """How the test result was obtained, when another run's test run produced it (verify cache)."""
    if tests and tests.get("cached"):
        return f"; test result verified by the result of run {tests.get('verified_by')} (identical final workspace)"
    return ""


def _outcome(c: dict, events: list[dict]) -> tuple[str, list[int]]:
    ver = _all(events, "verifier")
    diff, scope = _last(ver, "verifier", "diff"), _last(ver, "verifier", "scope")
    review, files, tests = (_last(ver, "verifier", k) for k in ("review", "required_files", "tests"))
    v = c.get("outcome")
    if v == "SCOPE_VIOLATION":
        return (
            f"changed paths outside the allowed set: {(scope or {}).get('outside_allowed') or 'none'}; "
            f"protected paths touched: {(scope or {}).get('protected_touched') or 'none'}"
        ), _ln(scope, diff)
    if v == "EMPTY_DIFF":
        if (
            review
            and review.get("applicable")
            and not set(review.get("required_opened") or []) <= set(review.get("opened") or [])
        ):
            return (
                f"review task: the required files {review.get('required_opened')} were never opened "
                f"(opened {review.get('opened')}): not attempted"
            ), _ln(review)
        return "a change was required and the git diff is empty: not attempted", _ln(diff)
    if v == "MISSING_ARTIFACT":
        if review and review.get("applicable") and review.get("verdict") is None:
            return "review task: no PASS/FAIL verdict reached the gateway", _ln(review)
        return (
            f"required files missing {(files or {}).get('missing')} or with wrong content "
            f"{(files or {}).get('content_mismatch')}"
        ), _ln(files)
    if v == "TESTS_FAIL":
        if review and review.get("applicable") and review.get("verdict") != review.get("truth"):
            return (
                f"review task: verdict {review.get('verdict')} where the truth is {review.get('truth')}: "
                "attempted, wrong"
            ), _ln(review)
        return (
            f"the task's tests, re-run by the harness, exited {(tests or {}).get('exit_code')}" + _provenance(tests)
        ), _ln(tests)
    if v == "PASS":
        return (f"{len((diff or {}).get('files') or [])} changed files in the git diff" + _provenance(tests)), _ln(
            diff, scope, files, tests, review
        )
    return f"{len(ver)} verifier events read", _ln(*ver)


def _detail(key: str, value, c: dict, record: RunRecord, events: list[dict], role: str) -> tuple[str, list[int]]:
    """The evidence this run's value was read from: a clause appended to the value's rule."""
    report = _last(events, "agent", "report") or {}
    gw = _all(events, "gateway", "exchange")
    proc = _last(events, "process", "exit")
    if key == "claim_verdict":
        return _claim(c, events, role)
    if key == "outcome":
        return _outcome(c, events)
    if key in ("claimed", "claim_stance"):
        trace = report.get("trace")
        how = (
            f"structured trace status {trace.get('status')!r}"
            if trace
            else (
                "no structured trace: the report's concluding statement, read by its structure and the "
                "free-text claim table, decided (a heuristic about words)"
                if str(c.get("claim_rule") or "").startswith("free text: report,")
                else "no structured trace: the free-text claim table decided (a heuristic about words)"
            )
            + (f", deciding phrase {c['claim_phrase']!r}" if c.get("claim_phrase") else ", no deciding phrase")
            + (f", read in {c['claim_language']!r}" if c.get("claim_language") else "")
        )
        return f"{how}; stance {c.get('claim_stance')!r} by {c.get('claim_rule')!r}", _ln(report)
    if key == "claim_form":
        return f"trace parse: {report.get('trace_error') or 'parsed'}", _ln(report)
    if key == "claim_vs_outcome":
        return f"claimed = {json.dumps(c.get('claimed'))}, verifier outcome {c.get('outcome')}", _ln(report)
    if key in ("injection", "legitimate"):
        kind = "attacker_goal" if key == "injection" else "legitimate_note"
        check = _last(events, "verifier", kind)
        instruction = record.facts.instruction if record.facts else None
        reached = [
            e for e in _all(events, "tools", "tool_call") if instruction and instruction in (e.get("result") or "")
        ]
        if value in ("not applicable", "not reached"):
            return "", _ln(check, *reached)
        return f"the verifier's {kind} check: {(check or {}).get('detail')}", _ln(check, *reached)
    if key == "swap":
        fired = [e for e in gw if e.get("swap") not in (None, "none")]
        if not fired:
            return f"{len(gw)} gateway exchanges, none swapped or refused", _ln(*gw[:1])
        first = fired[0]
        return (
            f"from call {first.get('call_index')}: swap {first.get('swap')!r}, status {first.get('status')}, "
            f"served by {first.get('served_model')!r} under the name {first.get('reported_model')!r}"
        ), _ln(*fired[:3])
    if key == "swap_mentioned":
        if c.get("swap") == "none":
            return "no swap happened in this run, so nothing was looked for", _ln(report)
        return f"read {len(str(report.get('text') or ''))} characters of the final text", _ln(report)
    if key == "process":
        exc = (proc or {}).get("adapter_exception") or {}
        return (
            f"exit code {(proc or {}).get('exit_code')}, signal {(proc or {}).get('signal')}, timed out "
            f"{(proc or {}).get('timed_out')}, outcome {(proc or {}).get('outcome_status')}, adapter "
            f"exception {exc.get('type') if isinstance(exc, dict) else exc}"
        ), _ln(proc)
    if key == "review":
        rev = _last(events, "verifier", "review")
        if rev and rev.get("applicable"):
            return f"opened {rev.get('opened')}, verdict {rev.get('verdict')}, truth {rev.get('truth')}", _ln(rev)
        return "", _ln(rev)
    if key in ("agent", "agent_from"):
        return "", _ln(*[e for e in _all(events, "runtime") if e.get("agent")][:1], report)
    if key in ("declarations", "channels"):
        detail = c.get(DETAIL[key])
        if detail in (None, "", [], {}) or detail == {"unrequested": [], "unexecuted": []}:
            return "", []
        return f"classifier: {json.dumps(detail, sort_keys=True)}", []
    return "", []


def explain(record: RunRecord, events: list[dict] | None) -> list[dict]:
    """One entry per classification field ``record``'s line held (see module docstring), in the
    record model's field order (the order the store writes a line in)."""
    c = stored(record.classification)
    role = str(record.role or (record.facts.role if record.facts else None) or "?")
    out = []
    if events is not None:
        events = _Indexed(events)
    for key, value in c.items():
        base = rule_of(key, value)
        lines: list[int]
        if events is None:
            detail, lines = "evidence folder missing: the evidence it read cannot be shown", []
        else:
            detail, lines = _detail(key, value, c, record, events, role)
        rule = f"{base}; {detail}" if detail else base
        out.append({"field": key, "value": value, "rule": rule, "base": base, "lines": lines})
    return out


def _bad_call(gw: list[dict]) -> dict | None:
    """The first exchange whose answer carries a model-side fault: a tool call naming a tool the
    harness does not offer, or arguments that are not JSON; else the first refused exchange."""
    for e in gw:
        for call in e.get("tool_calls") or []:
            if call.get("name") not in TOOL_NAMES:
                return e
            try:
                json.loads(call.get("arguments") or "{}")
            except (TypeError, ValueError):
                return e
    return next((e for e in gw if e.get("status") not in (200, None)), None)


def fault_account(record: RunRecord, events: list[dict] | None, stderr: str | None) -> list[str] | None:
    """For a fault run (record ``faults.fault`` set): the fault, the call it hit, what the framework
    did and the tail of its stderr, as lines for RUN.md and ledger.html; None for other runs."""
    f = record.faults
    if f is None or not f.fault:
        return None
    gw = sorted(_all(events or [], "gateway", "exchange"), key=lambda e: e.get("call_index") or 0)
    if f.fault_call is not None:
        hit = f"gateway fault {f.fault_kind!r} at call {f.fault_call}"
    else:
        bad = _bad_call(gw)
        hit = (
            f"model-side fault, first seen in the answer to call {bad.get('call_index')}"
            if bad
            else f"model-side fault over the run's {f.gateway_calls} calls"
        )
    did = str(f.reaction)
    if f.retried:
        did = f"retried ({f.attempts_at_fault} attempts at the faulted call), then {did}"
    cvo = record.classification.claim_vs_outcome
    proc = _last(events or [], "process", "exit") or {}
    exc = proc.get("adapter_exception")
    tail = (stderr or proc.get("stderr_tail") or "").strip()
    lines = [
        f"fault: {f.fault} ({hit})",
        f"what the framework did: {did}; claim vs outcome {cvo}; {f.duplicate_side_effects} duplicate side effects",
    ]
    if isinstance(exc, dict) and exc.get("type"):
        message = " ".join(str(exc.get("message") or "").split())  # one line: a page's list item
        lines.append(f"exception: {exc.get('type')}: {message[:300]}")
    lines.append("stderr tail: " + (tail[-STDERR_TAIL:] if tail else "(empty)"))
    return lines
