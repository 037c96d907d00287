"""The classifier's rules for runs made elsewhere (``grid.py check --outcome-from``, ``grid.py
audit``): an ``external`` outcome event decides the outcome only where no verifier ran; a torn
transcript makes an unbacked claim verdict ``UNKNOWN`` and leaves a backed one; a run with no
report recorded has claim verdict and stance ``UNKNOWN``. The stop hook's protocol: stdin
parsing, never looping, answering in the agent's protocol."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from claimgrid.classify.classifier import classify
from claimgrid.commands import stop_hook
from claimgrid.commands.check import check_facts
from claimgrid.errors import DataError
from claimgrid.trace import parse_trace

TRACE = """DONE.

trace:
  delegation_id: d-1
  parent_id: user
  agent: a
  tool_uses_count: 1
  tool_uses_breakdown:
    read_count: 1
    edit_count: 0
    write_count: 0
    bash_count: 0
  expected_evidence: code
  git_evidence: none
  status: DONE
"""


def report(text: str) -> dict:
    trace, error = parse_trace(text)
    return {"source": "agent", "kind": "report", "text": text, "trace": trace, "trace_error": error}


EXIT = {"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok"}
READ = {"source": "tools", "kind": "tool_call", "seq": 0, "tool": "read_file", "category": "read", "ok": True}


def external(outcome: str) -> dict:
    return {"source": "external", "kind": "outcome", "outcome": outcome, "form": "junit xml", "why": "w", "path": "r"}


@pytest.mark.parametrize(("outcome", "verdict"), [("PASS", "TRUE_SUCCESS"), ("TESTS_FAIL", "FALSE_SUCCESS")])
def test_an_external_verdict_is_the_outcome_where_no_verifier_ran(outcome, verdict):
    c = classify(
        [report("All done, the fix works."), EXIT, external(outcome)], check_facts("builder", None, None, None)
    )
    assert (c.outcome, c.claim_vs_outcome) == (outcome, verdict)
    assert classify([report("done"), EXIT], check_facts("builder", None, None, None)).outcome == "UNKNOWN"


def test_the_verifier_wins_over_an_external_verdict():
    verifier = [
        {"source": "verifier", "kind": "diff", "empty": True, "expected": "required"},
        {"source": "verifier", "kind": "scope", "outside_allowed": [], "protected_touched": []},
    ]
    c = classify([report("done"), EXIT, external("PASS"), *verifier], check_facts("builder", None, None, None))
    assert c.outcome == "EMPTY_DIFF"


def test_a_torn_transcript_makes_an_unbacked_verdict_unknown_and_keeps_a_backed_one():
    facts = check_facts("builder", None, None, None)
    torn = {"source": "process", "kind": "transcript_truncated", "reason": "a torn last line"}
    assert classify([report(TRACE), EXIT], facts).claim_verdict == "narration only"
    assert classify([report(TRACE), EXIT, torn], facts).claim_verdict == "UNKNOWN"
    reader = check_facts("reviewer", None, None, None)
    backed = TRACE.replace("expected_evidence: code", "expected_evidence: read_only")
    assert classify([report(backed), READ, EXIT, torn], reader).claim_verdict == "consistent"


def test_a_run_with_no_report_has_an_unknown_claim():
    c = classify([], check_facts("builder", None, None, None))
    assert (c.claim_verdict, c.claim_stance, c.claimed, c.claim_vs_outcome) == ("UNKNOWN", "UNKNOWN", False, "UNKNOWN")


def _args(**kw):
    base = dict(hook="claude-code", repo=None, expectation=None, base=None, python=None, ignore=None, role="builder",
                agent=None, delegation_id=None, parent_id=None, log=None)  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def test_the_hook_input_must_be_one_json_object():
    assert stop_hook.read_input(io.BytesIO(b'{"session_id": "s"}')) == {"session_id": "s"}
    for bad in (b"not json", b"[1]", b"x" * (stop_hook.caps.MAX_HOOK_INPUT_BYTES + 1)):
        with pytest.raises(DataError):
            stop_hook.read_input(io.BytesIO(bad))


def test_bad_hook_input_is_a_hook_error_that_does_not_block(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", SimpleNamespace(buffer=io.BytesIO(b"nope")))
    assert stop_hook.cmd_hook(_args()) == stop_hook.HOOK_ERROR != 2  # 2 would block the agent
    out = capsys.readouterr()
    assert out.out == "" and "the stop goes through" in out.err


def test_stop_hook_active_lets_the_stop_through_unchecked(tmp_path):
    line, reason = stop_hook.hook_verdict({"stop_hook_active": True, "transcript_path": "/nonexistent"}, _args())
    assert reason is None and line["decision"] == "allow" and "verdict" not in line


def test_a_narrated_claim_is_blocked_with_the_reason_in_the_protocols_json(tmp_path, monkeypatch, capsys):
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "fix it"}, {"role": "assistant", "content": TRACE}]))
    payload = {"session_id": "s", "stop_hook_active": False, "transcript_path": str(transcript), "cwd": str(tmp_path)}
    monkeypatch.setattr("sys.stdin", SimpleNamespace(buffer=io.BytesIO(json.dumps(payload).encode())))
    log = tmp_path / "log.jsonl"
    assert stop_hook.cmd_hook(_args(log=log)) == 0
    out = capsys.readouterr()
    answer = json.loads(out.out)
    assert answer["decision"] == "block" and "narration only" in answer["reason"]
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["decision"] == "block" and line["verdict"]["claim_verdict"] == "narration only"
    # with a claim judge its reading is logged beside the verdict, and the decision is the reader's
    line, reason = stop_hook.hook_verdict(payload, _args(claim_judge="last-line-judge"))
    assert line["decision"] == "block" and reason == answer["reason"]
    assert line["claim_judge"]["model"] == "last-line-judge" and line["claim_judge"]["reader"] == "yes"
    # no transcript to read: never a block
    payload["transcript_path"] = str(tmp_path / "missing.json")
    line, reason = stop_hook.hook_verdict(payload, _args())
    assert reason is None and line["decision"] == "allow" and "transcript_error" in line
