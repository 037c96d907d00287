"""``grid.py check --hook AGENT``: the claim check as the agent's own stop hook.

Claude Code and Codex CLI run a command when the agent is about to stop (their ``Stop`` hook:
Claude Code's settings ``hooks.Stop``, Codex's ``hooks.json``; the same protocol, Codex's
compatible with Claude Code's). The command gets one JSON object on stdin: ``session_id``,
``transcript_path`` (the session's JSONL), ``cwd``, ``hook_event_name``, ``stop_hook_active``
(true when the agent is already continuing because a stop hook blocked it) and, in recent
versions, ``last_assistant_message``. To keep the agent going, the hook prints
``{"decision": "block", "reason": ...}`` on stdout and exits 0; the agent gets the reason as
its next instruction. Exit 2 would block too (stderr as the reason); any other status is a
hook error that does not block.

What this hook does:

* ``stop_hook_active``: the stop goes through, checked no further: one block per stop, never a loop;
* reads the transcript at ``transcript_path`` with the readers of ``check --transcript``
  (:func:`claimgrid.classify.transcripts.read_transcript`) and takes the last report
  (``last_assistant_message``, else the transcript's);
* where the repository (``cwd``, or ``--repo``) holds an expectation (``--expectation FILE``,
  else ``<repository>/.claimgrid/expectation.toml`` when it exists), verifies it as
  ``check --repo --expectation`` does;
* classifies as ``check`` does; when the report claims success and the evidence does not back
  it (:func:`claimgrid.commands.check.backed`), blocks the stop with a reason naming what the
  evidence shows; otherwise lets it through;
* prints one line on stderr (what it decided and why) and appends the verdict, with the hook's
  session id and decision, to ``--log`` (the log ``check --report`` reads).

Gemini CLI's ``AfterAgent`` hook (``hooks.AfterAgent`` in ``.gemini/settings.json``; its
``packages/core/src/hooks``) is the same check in another protocol: it fires once per turn after
the model's final answer, with the same base fields (``transcript_path`` the saved session JSON,
``chats/session-*.json``), the answer as ``prompt_response`` and ``stop_hook_active`` set on the
turn a hook's denial started. It parses stdout as JSON (and, when stdout is empty, stderr as a
message), so this hook always prints one JSON object there: ``{"decision": "deny", "reason": ...}``
rejects the answer and sends the reason to the model as its next prompt, ``{"decision":
"allow"}`` lets it stand. Exit 1 is its non-blocking hook error too (any other non-zero exit blocks).

Precision before recall: a transcript it cannot read, a hook input it cannot parse or an
outcome it cannot decide never blocks (the line says why). Bad hook input exits 1, a
non-blocking hook error in both protocols (2 would block the agent).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from claimgrid import caps
from claimgrid.classify.transcripts import read_transcript
from claimgrid.commands.check import backed, check_facts, check_verdict, final_report, judge_reading, verify_against
from claimgrid.errors import ClaimgridError, DataError

HOOK_ERROR = 1  # a hook error that does not block (exit 2 blocks in these protocols)
EXPECTATION = Path(".claimgrid") / "expectation.toml"


def read_input(stream) -> dict:
    """The hook's stdin JSON object; DataError naming what is wrong."""
    raw = stream.read(caps.MAX_HOOK_INPUT_BYTES + 1)
    if len(raw) > caps.MAX_HOOK_INPUT_BYTES:
        raise DataError(
            "stdin", None, f"hook input over {caps.MAX_HOOK_INPUT_BYTES:,} bytes (caps.MAX_HOOK_INPUT_BYTES)"
        )
    try:
        payload = json.loads(raw or b"null")
    except (ValueError, RecursionError):
        raise DataError("stdin", None, "hook input is not JSON") from None
    if not isinstance(payload, dict):
        raise DataError("stdin", None, "hook input is not a JSON object")
    return payload


def reason_text(verdict: dict) -> str:
    """What the agent is told when its stop is blocked: what the evidence shows, never a guess."""
    cv, outcome = verdict.get("claim_verdict"), verdict.get("outcome")
    if verdict.get("claim_vs_outcome") == "FALSE_SUCCESS":
        shows = f"the repository check says {outcome}"
    else:
        shows = {
            "narration only": "no tool call in the transcript: the work was described, not done",
            "read-only imposture": "only reads in the transcript: nothing was changed",
            "claimed work without a diff": "the repository holds no change",
            "self-report contradicts the transcript": "the reported tool use is not the transcript's",
            "over-claimed evidence": "the evidence the claim needs is not in the transcript",
        }.get(str(cv), str(cv))
    return (
        f"claimgrid claim check: your report claims the task is done, but {shows} ({cv}; outcome {outcome}). "
        "Do the work and check it, or report plainly what is not done."
    )


# Gemini CLI's AfterAgent input when the turn produced no text (its client.ts): no report given.
GEMINI_NO_TEXT = "[no response text]"


def final_given(payload: dict) -> str | None:
    """The last report the hook input carries (Claude Code / Codex ``last_assistant_message``,
    Gemini CLI ``prompt_response``), or None: then the transcript's is read."""
    for key in ("last_assistant_message", "prompt_response"):
        text = payload.get(key)
        if isinstance(text, str) and text != GEMINI_NO_TEXT:
            return text
    return None


def answer(hook: str, reason: str | None) -> str | None:
    """The stdout JSON of the agent's protocol, or None where it wants nothing on a pass."""
    if hook == "gemini":
        return json.dumps({"decision": "deny", "reason": reason} if reason else {"decision": "allow"})
    return json.dumps({"decision": "block", "reason": reason}) if reason else None


def hook_verdict(payload: dict, args) -> tuple[dict, str | None]:
    """(the log line, the block reason or None) of one stop."""
    line: dict = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hook": args.hook,
        "session_id": payload.get("session_id"),
        "transcript": payload.get("transcript_path"),
    }
    if payload.get("stop_hook_active"):
        line["decision"] = "allow"
        line["why"] = "stop_hook_active: the agent already continued once because of a stop hook"
        return line, None
    transcript = None
    path = payload.get("transcript_path")
    if isinstance(path, str) and path:
        try:
            transcript = read_transcript(Path(path))
        except DataError as exc:
            line["transcript_error"] = " ".join(str(exc).split())
    given = final_given(payload)
    text = given if given is not None else (final_report(transcript) if transcript is not None else "")
    repo = args.repo or Path(str(payload.get("cwd") or os.getcwd()))
    expectation = args.expectation or (repo / EXPECTATION if (repo / EXPECTATION).is_file() else None)
    verification = expected = required = None
    if expectation is not None:
        try:
            verification, expected, required = verify_against(
                repo, expectation, transcript, args.base, args.python, args.ignore or []
            )
        except ClaimgridError as exc:
            line["repository_error"] = " ".join(str(exc).split())
    facts = check_facts(args.role, args.agent, args.delegation_id, args.parent_id, expected, required)
    verdict, unknown = check_verdict(text, transcript, verification, facts)
    line.update(
        final="hook input" if given is not None else "transcript",
        transcript_form=transcript.form if transcript is not None else None,
        repository=str(repo) if verification is not None else None,
        verdict=verdict,
        unknown=unknown,
    )
    if getattr(args, "claim_judge", None):  # logged beside the verdict; the block stays the reader's
        line["claim_judge"] = judge_reading(args.claim_judge, text, verdict)
    claimed = verdict.get("claim_stance") == "success"
    if claimed and transcript is not None and not backed(verdict):
        line["decision"] = "block"
        return line, reason_text(verdict)
    line["decision"] = "allow"
    return line, None


def cmd_hook(args) -> int:
    """Read the hook input, decide, answer in the agent's protocol (module doc)."""
    try:
        payload = read_input(sys.stdin.buffer)
    except DataError as exc:
        print(f"grid.py check --hook {args.hook}: {' '.join(str(exc).split())}; the stop goes through", file=sys.stderr)
        return HOOK_ERROR
    line, reason = hook_verdict(payload, args)
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        with open(args.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")
    said = answer(args.hook, reason)
    if said is not None:
        print(said, flush=True)
    if reason is not None:
        print(f"claim check: blocked the stop: {reason}", file=sys.stderr)
        return 0
    v = line.get("verdict") or {}
    why = (
        line.get("why")
        or line.get("transcript_error")
        or (f"claim verdict {v.get('claim_verdict')}, claim vs outcome {v.get('claim_vs_outcome')}")
    )
    print(f"claim check: the stop goes through ({why})", file=sys.stderr)
    return 0
