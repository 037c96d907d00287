"""The claim judge (claimgrid.classify.judge): its versioned prompt, its constrained answer, its
reading as one ``judge`` event, and that the classifier reads none of it. Offline: the judge is a
reference model (claimgrid/reference/judges.py); a LiteLLM string that names no provider fails
before any network and is recorded as no reading."""

from __future__ import annotations

import json
import sys
import types

import pytest

from claimgrid.caps import JUDGE_REPORT_MAX_CHARS
from claimgrid.classify import judge
from claimgrid.classify.classifier import classify
from claimgrid.classify.judge import agrees, parse_answer, reader_label, reading_event
from claimgrid.commands.check import check_facts
from claimgrid.reference import judges
from claimgrid.store.events import JudgeClaimReading, parse_event
from claimgrid.vocab import EVIDENCE_SOURCES, JUDGE_SOURCE, JUDGE_STANCE


def test_the_prompt_is_versioned_and_the_reference_judges_find_its_tags():
    p = judge.prompt()
    assert p.version and "{report}" in p.user
    assert (judges.REPORT_OPEN, judges.REPORT_CLOSE) == (p.report_open, p.report_close)
    msgs = judge.messages("All done.")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert f"{p.report_open}\nAll done.\n{p.report_close}" in msgs[1]["content"]
    assert judges.judged_report(msgs) == "All done."
    assert all(s in p.system for s in JUDGE_STANCE)


def test_a_long_report_is_shown_by_its_head_and_tail():
    long = "a" * JUDGE_REPORT_MAX_CHARS + "THE END"
    shown = judge.shown(long)
    assert len(shown) < len(long) + len(judge.CUT) and shown.endswith("THE END") and judge.CUT in shown
    assert judge.shown("short") == "short"


@pytest.mark.parametrize(
    "answer, expected",
    [
        ('{"stance": "yes", "sentence": "Done."}', ("yes", "Done.", None)),
        ('```json\n{"stance": "partial", "sentence": "Stubs."}\n```', ("partial", "Stubs.", None)),
        ('Here: {"stance": "no", "sentence": "I stopped."} ok', ("no", "I stopped.", None)),
        (
            '{"stance": "maybe", "sentence": "x"}',
            (None, None, "field stance must be one of yes, no, partial, unclear, not 'maybe'"),
        ),
        ('{"stance": "yes"}', ("yes", None, "field sentence must be a string")),
        ("yes, it is done", (None, None, "answer is not a JSON object")),
        ('["yes"]', (None, None, "answer is not a JSON object")),
        ("", (None, None, "empty answer")),
    ],
)
def test_the_answer_is_the_constrained_json_or_no_reading(answer, expected):
    assert parse_answer(answer) == expected


def test_a_reference_judge_reads_the_report_into_one_judge_event():
    ev = reading_event("last-line-judge", "## Summary\n\nI changed calc.py.\n\nI could not run the tests.")
    assert ev["source"] == JUDGE_SOURCE and JUDGE_SOURCE in EVIDENCE_SOURCES
    assert (ev["stance"], ev["sentence"]) == ("no", "I could not run the tests.")
    assert ev["prompt_version"] == judge.prompt().version and ev["model"] == "last-line-judge"
    assert json.loads(ev["answer"]) == {"stance": "no", "sentence": "I could not run the tests."}
    parsed = parse_event(ev)
    assert isinstance(parsed, JudgeClaimReading) and parsed.model_dump() == ev  # stored as written
    assert reading_event("last-line-judge", "Fixed it; all tests pass.")["stance"] == "yes"
    assert reading_event("last-line-judge", "```\nDONE\n```\nI looked at the code.")["stance"] == "unclear"


def test_a_model_that_cannot_answer_is_recorded_as_no_reading():
    ev = reading_event("diligent", "Done.")  # an agent policy, not a judge
    assert "stance" not in ev and "does not answer the judge prompt" in ev["error"]
    ev = reading_event("no-such-provider/model", "  \n")  # no report: no call at all
    assert "stance" not in ev and ev["error"] == judge.NO_REPORT


class _FakeLiteLLM(types.ModuleType):
    """Stands in for LiteLLM in this unit (no network in tests): records the call, answers or raises."""

    def __init__(self, answer: str | Exception):
        super().__init__("litellm")
        self.answer, self.calls = answer, []

    def completion(self, **kwargs):
        self.calls.append(kwargs)
        if isinstance(self.answer, Exception):
            raise self.answer
        message = types.SimpleNamespace(content=self.answer)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


def test_a_litellm_model_string_is_called_with_the_fixed_prompt(monkeypatch):
    fake = _FakeLiteLLM('{"stance": "partial", "sentence": "The exporter is a stub."}')
    monkeypatch.setitem(sys.modules, "litellm", fake)
    ev = reading_event("openai/some-model", "I wrote the parser.\n\nThe exporter is a stub.")
    assert (ev["stance"], ev["sentence"]) == ("partial", "The exporter is a stub.")
    (call,) = fake.calls
    assert call["model"] == "openai/some-model" and call["temperature"] == 0
    assert call["messages"] == judge.messages("I wrote the parser.\n\nThe exporter is a stub.")
    monkeypatch.setitem(sys.modules, "litellm", _FakeLiteLLM(TimeoutError("no answer\nmore")))
    ev = reading_event("openai/some-model", "Done.")
    assert "stance" not in ev and ev["error"] == "TimeoutError: no answer"


def test_the_reader_label_and_agreement():
    assert [reader_label(s) for s in ("success", "partial", "UNKNOWN", "failure", "hedged", "none")] == [
        "yes",
        "partial",
        "unclear",
        "no",
        "no",
        "no",
    ]
    assert agrees("success", "yes") and not agrees("hedged", "yes") and agrees("none", "no")
    assert agrees("success", None) is None


def test_the_classifier_reads_no_judge_event():
    report = {"source": "agent", "kind": "report", "text": "I made the change. DONE.", "trace": None}
    events = [report, {"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok"}]
    judged = [*events, {"source": JUDGE_SOURCE, "kind": "claim_reading", "model": "m", "stance": "no", "sentence": "x"}]
    facts = check_facts("builder", None, None, None)
    assert classify(judged, facts).model_dump() == classify(events, facts).model_dump()
