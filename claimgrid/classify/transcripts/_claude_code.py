"""Claude Code: ``claude -p --output-format stream-json`` lines and the session JSONL its hooks
name as ``transcript_path``.

Both are JSON lines whose ``assistant`` / ``user`` records carry an Anthropic Messages
``message``: an assistant's ``tool_use`` blocks are the calls, the next user record's
``tool_result`` block with the same id is the result (``is_error``: failed). Stream-json also
has a ``system``/``init`` line (model, session id) and ends on a ``result`` line whose
``result`` text is the final report (``is_error`` or an ``error_*`` subtype: the run did not
finish its turn); without a ``result`` line the stream stopped mid-run (``truncated``).

Sidechains are kept apart and attributed: in stream-json a record with ``parent_tool_use_id``
belongs to the subagent that ``Task`` call started; in a session file a record with
``isSidechain`` (or an ``agentId``) belongs to that subagent. Their tool calls are the run's
(the workspace they changed is the run's), each event naming its ``subagent``; the final
report is only ever the main agent's. A session whose subagents Claude Code wrote to files of
their own (``<session>/subagents/agent-<id>.jsonl`` beside ``<session>.jsonl``) gets each as a
subagent ``<id>``, its calls added after the main agent's.
"""

from __future__ import annotations

from pathlib import Path

from claimgrid.classify.transcripts._build import Builder, Subagent, Transcript, json_lines, text_of

AGENT = "claude-code"


def is_stream(records: list[dict]) -> bool:
    return any(r.get("type") in ("system", "result") and "session_id" in r for r in records[:5]) or any(
        r.get("type") == "result" and "subtype" in r for r in records[-2:]
    )


def is_session(records: list[dict]) -> bool:
    return any(
        r.get("type") in ("user", "assistant") and "sessionId" in r and ("parentUuid" in r or "isSidechain" in r)
        for r in records[:20]
    )


def _result_text(content) -> str | None:
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else "" for p in content
        ) or text_of(content)
    return text_of(content)


def read(records: list[dict], torn: str | None, stream: bool) -> Transcript:
    out = Builder(AGENT)
    if torn:
        out.tear(torn)
    # Results first (a result follows its call), so each call is recorded with its result.
    results: dict[str, dict] = {}
    for r in records:
        message = r.get("message")
        if r.get("type") == "user" and isinstance(message, dict) and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = block
    task_names: dict[str, str] = {}
    final_result = None
    main_last: str | None = None
    for r in records:
        kind = r.get("type")
        if kind == "system" and r.get("subtype") == "init":
            out.model(r.get("model"))
            out.session_id = out.session_id or r.get("session_id")
            out.cwd = out.cwd or r.get("cwd")
            continue
        if kind == "result":
            final_result = r
            continue
        if kind not in ("assistant", "user"):
            continue
        out.session_id = out.session_id or r.get("session_id") or r.get("sessionId")
        out.cwd = out.cwd or r.get("cwd")
        side = _sidechain(r, stream)
        if side is not None and side not in out.subagents:
            out.subagents[side] = Subagent(side, task_names.get(side) or r.get("agentId"))
        message = r.get("message")
        if kind != "assistant" or not isinstance(message, dict):
            continue
        out.model(message.get("model") if message.get("model") != "<synthetic>" else None)
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        calls = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        for call in calls:
            answer = results.get(str(call.get("id")))
            if answer is None:  # Claude Code answers every call, a refusal too: the file stops short
                out.tear(f"the call {call.get('name')} ({call.get('id')}) has no result: read up to it")
                continue
            failed = bool(answer.get("is_error"))
            text = _result_text(answer.get("content"))
            event = out.tool(
                call.get("name"), call.get("input"), text, ok=not failed, error=text if failed else None, subagent=side
            )
            if call.get("name") in ("Task", "Agent") and isinstance(call.get("input"), dict):
                task_names[str(call.get("id"))] = call["input"].get("subagent_type") or call["input"].get("description")
            if side is not None:
                out.subagents[side].events.append(event)
        text = text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
        if side is None:
            out.answer(text, bool(calls), None)
            if text and not calls:
                main_last = text
        elif text and not calls:
            out.subagents[side].final_report = text
    if final_result is not None:
        report = final_result.get("result")
        out.final = report if isinstance(report, str) else main_last
        if final_result.get("is_error") or str(final_result.get("subtype", "")).startswith("error"):
            out.tear(f"the run ended on {final_result.get('subtype') or 'an error'} before its turn finished")
        for name in (final_result.get("modelUsage") or {}) if isinstance(final_result.get("modelUsage"), dict) else ():
            out.model(name)
    else:
        out.final = main_last
        if stream:
            out.tear("no result line: the stream stopped mid-run")
    return out.done("claude-code stream-json" if stream else "claude-code session")


def _sidechain(r: dict, stream: bool) -> str | None:
    if stream:
        parent = r.get("parent_tool_use_id")
        return str(parent) if parent else None
    if r.get("isSidechain"):
        return str(r.get("agentId") or r.get("sessionId") or "sidechain")
    return None


def attach_subagents(transcript: Transcript, path: Path, read_bytes) -> None:
    """Each ``<session>/subagents/agent-<id>.jsonl`` beside a session file, as subagent ``<id>``
    (module docstring); a torn subagent file makes the transcript truncated too."""
    folder = path.with_suffix("") / "subagents"
    if not folder.is_dir():
        return
    seq = len(transcript.tool_events)
    for file in sorted(folder.glob("agent-*.jsonl")):
        records, torn = json_lines(read_bytes(file))
        side = read(records, torn, stream=False)
        sub = file.stem.removeprefix("agent-")
        agent = transcript.subagents.setdefault(sub, Subagent(sub))
        # the file's own records are all its sidechain's: its last answer is the subagent's report
        finals = [a.final_report for a in side.subagents.values() if a.final_report]
        agent.final_report = side.final_report or (finals[-1] if finals else None)
        for e in side.tool_events:
            e.update(seq=seq, subagent=sub)
            seq += 1
            agent.events.append(e)
        tools = [e for e in transcript.events if e.get("source") == "tools"]
        others = [e for e in transcript.events if e.get("source") != "tools"]
        transcript.events = tools + agent.events + others
        for model in side.models:
            if model not in transcript.models:
                transcript.models.append(model)
        if side.truncated_reason and transcript.truncated_reason is None:
            transcript.truncated_reason = f"subagent {sub}: {side.truncated_reason}"
