"""An agent's transcript in the forms other runtimes write, read as the harness's events.

``read_transcript(path) -> Transcript`` is the one face (``grid.py check --transcript FILE``;
``grid.py audit`` reads runs through it). The form is told apart by content, never by the
file's name; each form is a small private module:

* the general forms (``_forms``): **OpenAI-style chat messages** (a JSON list of messages, or
  ``{"messages": [...]}``), an **OpenTelemetry GenAI trace** (OTLP/JSON ``resourceSpans``), an
  **Inspect eval log** (JSON with ``eval`` and ``samples``, or a ``.eval`` zip), **a claimgrid
  run's own events** (``events.jsonl``);
* **Claude Code** ``--output-format stream-json`` and its **session JSONL** (``_claude_code``);
* **Codex CLI** ``exec --json`` and its **rollout JSONL** (``_codex``);
* **Gemini CLI** ``--output-format json`` / ``stream-json`` and a **saved session**, one JSON
  document or JSON lines (``_gemini``);
* a **Harbor trial folder** (``agent/trajectory.json`` in ATIF, ``result.json``,
  ``verifier/ctrf.json``) or an **ATIF trajectory** alone (``_atif``);
* **SWE-agent** ``.traj``, **mini-swe-agent** trajectories and **OpenHands** event streams
  (``_swe``).

Every agent tool counts as read / edit / write / bash by what it does, from one data table
(``claimgrid/classify/agent_tools.toml``); a shell command by what it runs
(:mod:`claimgrid.classify.shell`, the parser every agent's shell is read with); a tool error
is kept (``ok`` false, ``error``). A torn, truncated or mid-stream transcript is read as far as
it goes and says why in ``Transcript.truncated_reason`` (``transcript_truncated``), never a
traceback.

A file holding several runs (an OTLP file with several traces, an Inspect log with several
samples, an OpenHands ``output.jsonl``) needs ``select``: a trace id, or the
``gen_ai.conversation.id`` / ``claimgrid.run_id`` of its spans; an Inspect sample's id; an
OpenHands ``instance_id``. Anything else is :class:`claimgrid.errors.DataError`
naming the file and what is wrong, one line.

What a transcript cannot say is left unknown, never guessed: a tool call's workspace change
(``changed_workspace`` null, so the classifier's category rule applies), and, in a chat
transcript, whether a call failed (only a stated error says so).

Modules:

* ``_atif`` - Harbor: an ATIF trajectory (``agent/trajectory.json``) and a trial folder around it;
* ``_build`` - What every reader builds: the ``Transcript``, its tool events, the agents' tool
  table;
* ``_claude_code`` - Claude Code: ``claude -p --output-format stream-json`` lines and the session
  JSONL its hooks name as ``transcript_path``;
* ``_codex`` - Codex CLI: ``codex exec --json`` events and the session rollout JSONL;
* ``_forms`` - The four general forms: OpenAI-style chat messages, an OTel GenAI trace, an Inspect
  log, claimgrid's own events;
* ``_gemini`` - Gemini CLI: its ``--output-format json`` answer, its ``stream-json`` lines, and a
  saved session (``~/.gemini/tmp/<project>/chats/session-*.json``);
* ``_swe`` - SWE-agent ``.traj`` files, mini-swe-agent trajectories and OpenHands event streams.
"""

from __future__ import annotations

import json
from pathlib import Path

from claimgrid.classify.transcripts import _atif, _claude_code, _codex, _gemini, _swe
from claimgrid.classify.transcripts._build import (
    Subagent,
    ToolSpec,
    Transcript,
    category_of,
    json_lines,
    tool_table,
)
from claimgrid.classify.transcripts._forms import _chat, _claimgrid, _inspect, _inspect_samples, _otel
from claimgrid.errors import DataError

__all__ = ["FORMS", "Subagent", "ToolSpec", "Transcript", "category_of", "read_transcript", "tool_table"]

FORMS = (
    "openai messages",
    "otel trace",
    "inspect log",
    "claimgrid events",
    "claude-code stream-json",
    "claude-code session",
    "codex exec json",
    "codex rollout",
    "gemini-cli json",
    "gemini-cli stream-json",
    "gemini-cli session",
    "atif trajectory",
    "harbor trial",
    "mini-swe-agent trajectory",
    "swe-agent trajectory",
    "openhands events",
)
_UNKNOWN = (
    "not a transcript in a known form (OpenAI-style messages, an OTLP/JSON GenAI trace, an Inspect "
    "eval log, a claimgrid events.jsonl, Claude Code stream-json or session JSONL, Codex exec --json or "
    "rollout, Gemini CLI JSON, stream-json or session, an ATIF trajectory or Harbor trial folder, a "
    "SWE-agent, mini-swe-agent or OpenHands trajectory)"
)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(path, None, f"cannot read the transcript: {exc.strerror}") from None


def _json_file(path: Path):
    raw = _read(path)
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise DataError(path, None, "not readable JSON (torn or cut short)") from None


def _document(path: Path, doc, select: str | None) -> Transcript | None:
    """A transcript that is one JSON document, or None."""
    if isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list):
        return _otel(path, doc, select)
    if isinstance(doc, dict) and isinstance(doc.get("eval"), dict) and isinstance(doc.get("samples"), list):
        return _inspect(path, doc["samples"], select)
    if _atif.is_atif(doc):
        return _atif.read_atif(doc)
    if _swe.is_mini(doc):
        return _swe.read_mini(doc)
    if _swe.is_swe_agent(doc):
        return _swe.read_swe_agent(doc)
    if _gemini.is_output(doc):
        return _gemini.read_output(doc)
    if _gemini.is_session(doc):
        return _gemini.read_session(doc)
    if _swe.is_openhands(doc):
        return _swe.read_openhands(doc)
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if isinstance(messages, list) and messages and all(isinstance(m, dict) and "role" in m for m in messages):
        return _chat(messages).done("openai messages")
    return None


def _lines(path: Path, records: list[dict], torn: str | None, select: str | None = None) -> Transcript | None:
    """A transcript that is JSON lines (read up to a torn line), or None."""
    if not records:
        return None
    if all(isinstance(r.get("history"), list) for r in records):  # an OpenHands output.jsonl: one run a line
        runs = [r for r in records if select is None or str(r.get("instance_id")) == select]
        if len(runs) != 1:
            what = f"no instance {select!r}" if select is not None else f"{len(runs)} instances: name one with --run"
            raise DataError(path, "--run", f"the OpenHands output holds {what}")
        found = _swe.read_openhands(runs[0])
        if torn:
            found.truncated_reason = found.truncated_reason or torn
        return found
    if _claude_code.is_stream(records):
        return _claude_code.read(records, torn, stream=True)
    if _claude_code.is_session(records):
        found = _claude_code.read(records, torn, stream=False)
        _claude_code.attach_subagents(found, path, _read)
        return found
    if _codex.is_rollout(records):
        return _codex.read_rollout(records, torn)
    if _codex.is_exec(records):
        return _codex.read_exec(records, torn)
    if _gemini.is_stream(records):
        return _gemini.read_stream(records, torn)
    if _gemini.is_session_lines(records):
        return _gemini.read_session(_gemini.fold_session(records), torn)
    return None


def read_transcript(path: Path, select: str | None = None) -> Transcript:
    """``path`` read as one run's transcript in whichever of :data:`FORMS` its content is (a
    Harbor trial is a folder); ``select`` names the run in a file holding several (see the
    module doc)."""
    path = Path(path)
    if path.is_dir():
        if _atif.is_trial(path):
            return _atif.read_trial(path, _json_file, read_transcript)
        raise DataError(path, None, "a folder is read as a Harbor trial: it needs agent/trajectory.json or result.json")
    raw = _read(path)
    if raw[:2] == b"PK":
        return _inspect(path, _inspect_samples(path, raw), select)
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise DataError(path, None, "not a transcript: JSON nested too deep to read") from None
    except ValueError:
        found = _claimgrid(path, raw)
        if found is not None:
            return found
        records, torn = json_lines(raw)
        found = _lines(path, records, torn, select)
        if found is not None:
            return found
        if not records and text.lstrip()[:1] in ("{", "["):
            raise DataError(
                path, None, "one JSON document cut short (not whole JSON, no JSON lines): unreadable"
            ) from None
        raise DataError(path, None, _UNKNOWN) from None
    found = _document(path, doc, select)
    if found is not None:
        return found
    if isinstance(doc, dict) and doc.get("source") and "kind" in doc:  # one event: a claimgrid events file
        events = _claimgrid(path, raw)
        if events is not None:
            return events
    if isinstance(doc, dict):  # one line of a JSON-lines form
        found = _lines(path, [doc], None, select)
        if found is not None:
            return found
    raise DataError(path, None, _UNKNOWN)
