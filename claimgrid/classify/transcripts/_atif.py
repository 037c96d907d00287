"""Harbor: an ATIF trajectory (``agent/trajectory.json``) and a trial folder around it.

An ATIF trajectory (``{"schema_version": "ATIF-v1.x", "agent": {...}, "steps": [...]}``):
each ``agent`` step's ``tool_calls`` (``tool_call_id``, ``function_name``, ``arguments``) are
the calls, its ``observation.results`` (``source_call_id``, ``content``) their results, its
``message`` what the model said, its ``model_name`` (or ``agent.model_name``) the model; the
last agent step's message is the final report. The agent is ``agent.name`` (Terminus' calls
are keystrokes: read as the command they type, ``agent_tools.toml``).

A trial folder (a directory with ``agent/trajectory.json`` or ``result.json``): the trajectory,
and the trial's recorded verdict, ``result.json``'s ``verifier_result.rewards`` (else
``verifier/ctrf.json``), as the transcript's ``outcome`` (source ``external``,
:mod:`claimgrid.classify.outcomes`). Without a trajectory, the first file under ``agent/`` that
is a transcript in a known form (Claude Code's stream-json log, a Codex or Gemini CLI log) is
read (its agent and calls; form ``harbor trial``); without either the folder is read as far as it
goes: no calls, and ``truncated`` says why.
"""

from __future__ import annotations

from pathlib import Path

from claimgrid.classify.outcomes import read_outcome
from claimgrid.classify.transcripts._build import Builder, Transcript, obj, text_of
from claimgrid.errors import DataError

TRAJECTORY = Path("agent") / "trajectory.json"
RESULT = "result.json"
CTRF = Path("verifier") / "ctrf.json"
# ATIF agent names as the tool table names them (Terminus ships as terminus, terminus-1, terminus-2).
_AGENTS = {
    "terminus-1": "terminus",
    "terminus-2": "terminus",
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini-cli",
    "openhands": "openhands",
    "mini-swe-agent": "mini-swe-agent",
    "swe-agent": "swe-agent",
}


def is_atif(doc) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("steps"), list)
        and (str(doc.get("schema_version", "")).upper().startswith("ATIF") or isinstance(doc.get("agent"), dict))
    )


def is_trial(path: Path) -> bool:
    return path.is_dir() and ((path / TRAJECTORY).is_file() or (path / RESULT).is_file())


def read_atif(doc: dict, out: Builder | None = None) -> Transcript:
    agent = obj(doc.get("agent"))
    name = str(agent.get("name") or "")
    out = out or Builder(None)
    out.agent = _AGENTS.get(name, name or None)
    out.session_id = doc.get("session_id")
    out.model(agent.get("model_name"))
    last = None
    for step in doc["steps"]:
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        out.model(step.get("model_name"))
        observation = obj(step.get("observation"))
        results = {str(r.get("source_call_id")): r for r in observation.get("results") or [] if isinstance(r, dict)}
        calls = [c for c in step.get("tool_calls") or [] if isinstance(c, dict)]
        for n, call in enumerate(calls):
            result = results.get(str(call.get("tool_call_id")))
            if result is None and len(calls) == 1 and len(results) == 1:
                result = next(iter(results.values()))  # one call, one result without its id
            if result is None and n == len(calls) - 1 and step is doc["steps"][-1]:
                out.tear(f"the last call {call.get('function_name')} has no observation: read up to it")
            content = text_of(result.get("content")) if result else None
            out.tool(call.get("function_name"), call.get("arguments"), content)
        text = text_of(step.get("message"))
        out.answer(text, bool(calls))
        if text and text.strip():
            last = text
    out.final = last
    return out.done("atif trajectory")


def read_trial(path: Path, read_json, read_any=None) -> Transcript:
    """A Harbor trial folder (module docstring); ``read_json(path)`` reads one JSON file,
    ``read_any(path)`` one file in any transcript form (a trial without an ATIF trajectory:
    the agent's own log in ``agent/``, e.g. Claude Code's stream-json)."""
    out = Builder(None)
    outcome = None
    for candidate in (path / RESULT, path / CTRF):
        if candidate.is_file():
            try:
                outcome = read_outcome(candidate)
                break
            except DataError:
                continue
    out.outcome = outcome
    trajectory = path / TRAJECTORY
    if trajectory.is_file():
        doc = read_json(trajectory)
        if is_atif(doc):
            transcript = read_atif(doc, out)
            transcript.form = "harbor trial"
            return transcript
        out.tear(f"{TRAJECTORY} is not an ATIF trajectory")
    elif read_any is not None and (path / "agent").is_dir():
        for log in sorted(p for p in (path / "agent").rglob("*") if p.is_file() and p.stat().st_size):
            try:
                transcript = read_any(log)
            except DataError:
                continue
            transcript.form, transcript.outcome = "harbor trial", outcome
            return transcript
    if not trajectory.is_file():
        out.tear(f"no {TRAJECTORY} nor an agent log in a known form: the trial's calls are unknown")
    return out.done("harbor trial")
