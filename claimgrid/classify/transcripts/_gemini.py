"""Gemini CLI: its ``--output-format json`` answer, its ``stream-json`` lines, and a saved
session (``~/.gemini/tmp/<project>/chats/session-*.json``, or ``.jsonl`` in recent versions).

* the JSON answer (``{"response", "stats"}``): the final report and the model names of
  ``stats.models``; it holds no tool call, only counts (``stats.tools.byName``), so its tool
  calls are unknown and the transcript says so (``truncated``: the calls are not in it).
* ``stream-json``: ``init`` (session id, model), ``message`` (``role`` assistant: text, deltas
  joined), ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``), ``tool_result``
  (``tool_id``, ``status``, ``output`` / ``error``), and a closing ``result``; without it the
  stream stopped mid-run.
* a session (``{"sessionId", "messages": [...]}``): a ``gemini`` message's ``toolCalls``
  (``name``, ``args``, ``status``, ``result``) are the calls, its ``content`` the answer, its
  ``model`` the model; the last ``gemini`` message's content is the final report.
* a session as JSON lines (``chats/session-*.jsonl``, what recent versions write and name as a
  hook's ``transcript_path``): a first line of metadata (``sessionId``, ``projectHash``), then
  records folded as Gemini CLI's own loader (``chatRecordingService.ts``) folds them: a message
  (a string ``id``) is added or, with an ``id`` already seen, replaces that message in place; a
  ``$set`` merges metadata and, with ``messages``, restarts the list from them; ``$rewindTo``
  drops that message and every later one. The folded session is read as above.
"""

from __future__ import annotations

from claimgrid.classify.transcripts._build import Builder, Transcript, text_of

AGENT = "gemini-cli"


def is_output(doc) -> bool:
    return isinstance(doc, dict) and "response" in doc and isinstance(doc.get("stats"), dict)


def is_session(doc) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and ("sessionId" in doc or "projectHash" in doc)
        and all(isinstance(m, dict) and "type" in m for m in doc["messages"][:5])
    )


def is_session_lines(records: list[dict]) -> bool:
    first = records[0]
    return (
        isinstance(first.get("sessionId"), str)
        and isinstance(first.get("projectHash"), str)
        and "type" not in first
        and all(isinstance(r.get("id"), str) or "$set" in r or "$rewindTo" in r or r is first for r in records)
    )


def fold_session(records: list[dict]) -> dict:
    """The session the JSON lines stand for (module doc), as one ``{"sessionId", "messages"}``."""
    meta: dict = {}
    messages: dict[str, dict] = {}  # insertion order kept on replace, as a JS Map's

    def restart(listed) -> None:
        messages.clear()
        for m in listed if isinstance(listed, list) else []:
            if isinstance(m, dict) and isinstance(m.get("id"), str):
                messages[m["id"]] = m

    for r in records:
        if isinstance(r.get("$rewindTo"), str):
            ids = list(messages)
            for gone in ids[ids.index(r["$rewindTo"]) :] if r["$rewindTo"] in messages else ids:
                del messages[gone]
        elif isinstance(r.get("id"), str):
            messages[r["id"]] = r
        elif isinstance(r.get("$set"), dict):
            if "messages" in r["$set"]:
                restart(r["$set"]["messages"])
            meta.update({k: v for k, v in r["$set"].items() if k != "messages"})
        elif isinstance(r.get("sessionId"), str):
            if "messages" in r:
                restart(r["messages"])
            meta.update({k: v for k, v in r.items() if k != "messages"})
    return {**meta, "messages": list(messages.values())}


def is_stream(records: list[dict]) -> bool:
    return any(r.get("type") == "init" and "session_id" in r for r in records[:3]) and any(
        r.get("type") in ("message", "tool_use", "tool_result", "result") for r in records
    )


def read_output(doc: dict) -> Transcript:
    out = Builder(AGENT)
    stats = doc.get("stats") or {}
    for name in stats.get("models") or {}:
        out.model(name)
    out.final = doc.get("response") if isinstance(doc.get("response"), str) else None
    if doc.get("error"):
        error = doc["error"]
        out.tear(f"the run ended on an error: {str(error.get('message') if isinstance(error, dict) else error)[:200]}")
    calls = ((stats.get("tools") or {}).get("totalCalls")) if isinstance(stats.get("tools"), dict) else None
    if calls:
        out.tear(f"the JSON output counts {calls} tool call(s) but holds none: read a session or stream-json for them")
    if out.final:
        out.answer(out.final, False)
    return out.done("gemini-cli json")


def _result_text(result) -> str | None:
    """A session tool call's ``result``: a list of function responses (``output`` / ``error``)."""
    if isinstance(result, list):
        parts = []
        for r in result:
            response = (r.get("functionResponse") or {}).get("response") if isinstance(r, dict) else None
            if isinstance(response, dict):
                value = response.get("output", response.get("error"))
                parts.append(value if isinstance(value, str) else text_of(value) or "")
            elif isinstance(r, dict) and isinstance(r.get("text"), str):
                parts.append(r["text"])
        return "\n".join(parts)
    return text_of(result)


def read_session(doc: dict, torn: str | None = None) -> Transcript:
    out = Builder(AGENT)
    if torn:
        out.tear(torn)
    out.session_id = doc.get("sessionId")
    last = None
    for m in doc["messages"]:
        if m.get("type") not in ("gemini", "model", "assistant"):
            continue
        out.model(m.get("model"))
        calls = [c for c in m.get("toolCalls") or [] if isinstance(c, dict)]
        for c in calls:
            status = c.get("status")
            failed = status in ("error", "cancelled")
            text = _result_text(c.get("result"))
            if text is None and isinstance(c.get("resultDisplay"), str):
                text = c["resultDisplay"]
            out.tool(c.get("name"), c.get("args"), text, ok=not failed, error=(text or status) if failed else None)
        text = text_of(m.get("content"))
        out.answer(text, bool(calls))
        if text and text.strip():
            last = text
    out.final = last
    return out.done("gemini-cli session")


def read_stream(records: list[dict], torn: str | None) -> Transcript:
    out = Builder(AGENT)
    if torn:
        out.tear(torn)
    results = {str(r.get("tool_id")): r for r in records if r.get("type") == "tool_result"}
    text: list[str] = []
    ended = False
    last = None

    def flush(has_calls: bool) -> None:
        nonlocal last
        said = "".join(text)
        if said.strip():
            out.answer(said, has_calls)
            last = said if not has_calls else last
        text.clear()

    for r in records:
        kind = r.get("type")
        if kind == "init":
            out.session_id = r.get("session_id")
            out.model(r.get("model"))
        elif kind == "message" and r.get("role") == "assistant":
            if not r.get("delta"):
                flush(False)
            text.append(str(r.get("content") or ""))
        elif kind == "tool_use":
            flush(True)
            answer = results.get(str(r.get("tool_id")))
            if answer is None:
                out.tear(f"the call {r.get('tool_name')} ({r.get('tool_id')}) has no result: read up to it")
                continue
            failed = answer.get("status") == "error"
            error = answer.get("error")
            message = (error.get("message") if isinstance(error, dict) else error) if error else None
            out.tool(
                r.get("tool_name"),
                r.get("parameters"),
                text_of(answer.get("output")),
                ok=not failed,
                error=str(message or "error") if failed else None,
            )
        elif kind == "result":
            ended = True
            if r.get("status") not in (None, "success"):
                out.tear(f"the run ended with status {r.get('status')}")
    flush(False)
    if not ended:
        out.tear("no result line: the stream stopped mid-run")
    out.final = last
    return out.done("gemini-cli stream-json")
