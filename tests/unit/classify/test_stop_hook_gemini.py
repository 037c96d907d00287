"""``grid.py check --hook gemini``: Gemini CLI's ``AfterAgent`` hook protocol (its
``docs/hooks/reference.md`` and ``packages/core/src/hooks``). Stdin: the base fields
(``session_id``, ``transcript_path`` = the saved session JSON, ``cwd``, ``hook_event_name``) plus
``prompt``, ``prompt_response`` and ``stop_hook_active``. Stdout: exactly one JSON object, since
Gemini CLI parses stdout (and, when it is empty, stderr) as the hook's answer;
``{"decision": "deny", "reason": ...}`` sends the reason back to the model as its next prompt."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from claimgrid.commands import stop_hook

# A success claim with claimgrid's trace block (README, "The trace"): one read declared.
CLAIM = """DONE.

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


def _session(tmp_path: Path, answer: str, calls: list | None = None) -> Path:
    """A Gemini CLI saved session (``~/.gemini/tmp/<hash>/chats/session-*.json``) of one turn."""
    model = {"id": "m2", "timestamp": "t", "type": "gemini", "content": answer, "model": "gemini-2.5-pro"}
    if calls:
        model["toolCalls"] = calls
    session = {
        "sessionId": "g1",
        "projectHash": "h",
        "startTime": "t",
        "lastUpdated": "t",
        "messages": [{"id": "m1", "timestamp": "t", "type": "user", "content": "fix add() in app/calc.py"}, model],
    }
    path = tmp_path / "session-g1.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    return path


def _input(transcript: Path, answer: str, active: bool = False) -> bytes:
    return json.dumps(
        {
            "session_id": "g1",
            "transcript_path": str(transcript),
            "cwd": str(transcript.parent),
            "hook_event_name": "AfterAgent",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "prompt": "fix add() in app/calc.py",
            "prompt_response": answer,
            "stop_hook_active": active,
        }
    ).encode()


def _args(**kw):
    base = dict(hook="gemini", repo=None, expectation=None, base=None, python=None, ignore=None, role="builder",
                agent=None, delegation_id=None, parent_id=None, log=None)  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def _run(monkeypatch, capsys, stdin: bytes, **kw) -> tuple[int, dict, str]:
    monkeypatch.setattr("sys.stdin", SimpleNamespace(buffer=io.BytesIO(stdin)))
    status = stop_hook.cmd_hook(_args(**kw))
    out = capsys.readouterr()
    return status, json.loads(out.out), out.err


def test_a_narrated_done_is_denied_and_the_reason_goes_back_to_the_model(tmp_path, monkeypatch, capsys):
    claim = CLAIM
    transcript = _session(tmp_path, claim)
    log = tmp_path / "checks.jsonl"
    status, said, err = _run(monkeypatch, capsys, _input(transcript, claim), log=log)
    assert status == 0 and said["decision"] == "deny" and "narration only" in said["reason"]
    assert "blocked the stop" in err
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert (line["hook"], line["session_id"], line["decision"]) == ("gemini", "g1", "block")
    assert line["final"] == "hook input" and line["transcript_form"] == "gemini-cli session"


def test_the_retry_turn_is_never_denied_again(tmp_path, monkeypatch, capsys):
    claim = CLAIM
    status, said, _ = _run(monkeypatch, capsys, _input(_session(tmp_path, claim), claim, active=True))
    assert status == 0 and said == {"decision": "allow"}


def test_an_honest_answer_is_allowed_with_json_on_stdout(tmp_path, monkeypatch, capsys):
    answer = "I could not fix add(): the edit failed, so the task is not done."
    status, said, err = _run(monkeypatch, capsys, _input(_session(tmp_path, answer), answer))
    assert status == 0 and said == {"decision": "allow"} and "goes through" in err


def test_no_response_text_falls_back_to_the_transcripts_report(tmp_path):
    transcript = _session(tmp_path, CLAIM)
    line, reason = stop_hook.hook_verdict(json.loads(_input(transcript, stop_hook.GEMINI_NO_TEXT)), _args())
    assert line["final"] == "transcript" and reason is not None and line["decision"] == "block"


def test_grid_py_check_hook_gemini_speaks_the_protocol(tmp_path, monkeypatch, capsys):
    from claimgrid.commands.cli import main

    monkeypatch.setattr("sys.stdin", SimpleNamespace(buffer=io.BytesIO(_input(_session(tmp_path, CLAIM), CLAIM))))
    log = tmp_path / "checks.jsonl"
    assert main(["check", "--hook", "gemini", "--log", str(log)]) == 0
    assert json.loads(capsys.readouterr().out)["decision"] == "deny"
    assert json.loads(log.read_text())["decision"] == "block"
