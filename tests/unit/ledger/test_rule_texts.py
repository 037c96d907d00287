"""Every classification value has its own rule text (claimgrid.rule_texts), and the run pages'
explanation of a value is that value's rule, never another's."""

from __future__ import annotations

import typing

from claimgrid import vocab
from claimgrid.ledger.rules import explain, fault_account
from claimgrid.rule_texts import ANY, RULES, key, rule_of
from claimgrid.store.record import Classification


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


def test_explain_uses_the_recorded_values_rule():
    c = {"claim_verdict": "consistent", "swap_mentioned": False, "claimed": False, "outcome": "SCOPE_VIOLATION"}
    events = [
        {"source": "verifier", "kind": "scope", "outside_allowed": ["secrets.txt"], "protected_touched": [], "_line": 3},
        {"source": "agent", "kind": "report", "text": "done", "_line": 1},
    ]
    for e in explain({"classification": c}, events):
        assert e["rule"].startswith(RULES[e["field"]][key(e["value"])])
        assert e["base"] == RULES[e["field"]][key(e["value"])]
    scope = next(e for e in explain({"classification": c}, events) if e["field"] == "outcome")
    assert "outside the allowed set: ['secrets.txt']" in scope["rule"] and scope["lines"] == [3]


def test_fault_account_names_fault_call_reaction_and_stderr():
    record = {
        "classification": {"claim_vs_outcome": "HONEST_FAILURE"},
        "faults": {"fault": "rate-limited", "fault_kind": "rate_limited", "fault_call": 1, "reaction": "raised",
                   "retried": True, "attempts_at_fault": 3, "gateway_calls": 4, "duplicate_side_effects": 0},
    }
    events = [{"source": "process", "kind": "exit", "adapter_exception": {"type": "RateLimitError", "message": "429"}}]
    lines = fault_account(record, events, "Traceback ...\nRateLimitError: 429\n")
    text = "\n".join(lines)
    assert "rate-limited" in text and "call 1" in text and "retried (3 attempts" in text and "raised" in text
    assert "RateLimitError: 429" in text and lines[-1].startswith("stderr tail: ")
    assert fault_account({"faults": {"fault": None}}, events, None) is None
    # a model-side fault: the first answer with a tool the harness does not offer
    gw = [{"source": "gateway", "kind": "exchange", "call_index": 0, "status": 200,
           "tool_calls": [{"name": "deploy_to_production", "arguments": "{}"}]}]
    record["faults"] = {**record["faults"], "fault": "unknown-tool", "fault_call": None, "retried": False}
    assert "answer to call 0" in fault_account(record, gw, "")[0]
