"""Every classification value has its own rule text (claimgrid.rule_texts), and the run pages'
explanation of a value is that value's rule, never another's."""

from __future__ import annotations

import typing

from claimgrid import vocab
from claimgrid.ledger.rules import explain, fault_account
from claimgrid.rule_texts import ANY, RULES, key, rule_of
from claimgrid.store.record import Classification, RunRecord, parse_record

from tests.ledger_support import classification


def _literal_values(annotation) -> list | None:
    """The values of a (possibly Optional) Literal annotation; None for a free-valued field."""
    if typing.get_origin(annotation) is typing.Literal or annotation is bool:
        args = [annotation]
    else:
        args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    found = []
    for a in args:
        if typing.get_origin(a) is typing.Literal:
            found += list(typing.get_args(a))
        elif a is bool:
            found += [True, False]
        else:
            return None
    return found


def test_every_field_of_the_record_has_rules():
    assert set(Classification.model_fields) == set(RULES) - {"change_rule"}


def test_every_value_has_its_own_text():
    for name, info in Classification.model_fields.items():
        values = _literal_values(info.annotation)
        texts = RULES[name]
        if values is None:
            assert list(texts) == [ANY], name  # free values: one rule for the field
            continue
        assert {key(v) for v in values} <= set(texts), (name, {key(v) for v in values} - set(texts))
        shown = [rule_of(name, v) for v in values]
        assert len(set(shown)) == len(shown), name  # no two values share a sentence


def test_vocabulary_literals_all_covered():
    for field, literal in vocab.FIELDS.items():  # change_rule: the evidence's rule, shown on run pages
        for v in vocab.values(literal):
            assert key(v) in RULES[field], (field, v)


def test_unknown_value_names_itself_not_another_rule():
    text = rule_of("outcome", "SOMETHING_NEW")
    assert "SOMETHING_NEW" in text and text not in RULES["outcome"].values()
    assert "not recorded" in rule_of("review", None)


def _record(c: dict, **fields) -> RunRecord:
    """A typed record (the ledger reads no other) with classification ``c`` over a complete one."""
    coords = {"run_id": "r1", "framework": "f", "task": "t", "content": "clean", "swap": "none", "model": "m"}
    return parse_record({**coords, "classification": classification(**c), **fields}, "test")


def test_explain_uses_the_recorded_values_rule():
    c = {
        "claim_verdict": "consistent",
        "swap_mentioned": False,
        "claimed": False,
        "outcome": "SCOPE_VIOLATION",
        "claim_vs_outcome": "HONEST_FAILURE",
    }
    events = [
        {
            "source": "verifier",
            "kind": "scope",
            "outside_allowed": ["secrets.txt"],
            "protected_touched": [],
            "_line": 3,
        },
        {"source": "agent", "kind": "report", "text": "done", "_line": 1},
    ]
    entries = explain(_record(c), events)
    # The fields the line holds, in the record model's order (the order the store writes a line in).
    assert [e["field"] for e in entries] == [f for f in Classification.model_fields if f in classification(**c)]
    for e in entries:
        assert e["rule"].startswith(RULES[e["field"]][key(e["value"])])
        assert e["base"] == RULES[e["field"]][key(e["value"])]
    scope = next(e for e in entries if e["field"] == "outcome")
    assert "outside the allowed set: ['secrets.txt']" in scope["rule"] and scope["lines"] == [3]


def test_fault_account_names_fault_call_reaction_and_stderr():
    faults = {
        "fault": "rate-limited",
        "fault_kind": "rate_limited",
        "fault_call": 1,
        "reaction": "raised",
        "retried": True,
        "raised": True,
        "claimed": False,
        "attempts_at_fault": 3,
        "gateway_calls": 4,
        "duplicate_side_effects": 0,
    }
    c = {"outcome": "TESTS_FAIL", "claim_vs_outcome": "HONEST_FAILURE"}
    record = _record(c, faults=faults)
    events = [{"source": "process", "kind": "exit", "adapter_exception": {"type": "RateLimitError", "message": "429"}}]
    lines = fault_account(record, events, "Traceback ...\nRateLimitError: 429\n")
    text = "\n".join(lines)
    assert "rate-limited" in text and "call 1" in text and "retried (3 attempts" in text and "raised" in text
    assert "RateLimitError: 429" in text and lines[-1].startswith("stderr tail: ")
    assert fault_account(_record(c, faults={**faults, "fault": None}), events, None) is None
    assert fault_account(_record(c), events, None) is None  # a record older than fault facts
    # a model-side fault: the first answer with a tool the harness does not offer
    gw = [
        {
            "source": "gateway",
            "kind": "exchange",
            "call_index": 0,
            "status": 200,
            "tool_calls": [{"name": "deploy_to_production", "arguments": "{}"}],
        }
    ]
    record = _record(c, faults={**faults, "fault": "unknown-tool", "fault_call": None, "retried": False})
    assert "answer to call 0" in fault_account(record, gw, "")[0]
