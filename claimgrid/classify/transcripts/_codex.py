"""Codex CLI: ``codex exec --json`` events and the session rollout JSONL.

* ``exec --json``: ``thread.started``, ``turn.started`` / ``turn.completed`` / ``turn.failed``
  and ``item.*`` lines; an ``item.completed`` item is a ``command_execution`` (``command``,
  ``aggregated_output``, ``exit_code``, ``status``), a ``file_change`` (``changes``: paths and
  kinds), an ``mcp_tool_call``, or an ``agent_message`` (its ``text``; the last is the final
  report). An item started and never completed, or no ``turn.completed`` at the end, is a
  stream that stopped mid-run (``truncated``); ``turn.failed`` / ``error`` says why. The older
  ``{"id", "msg": {...}}`` lines (``exec_command_begin`` / ``exec_command_end``,
  ``patch_apply_*``, ``agent_message``, ``task_complete``) are read the same way.
* the rollout (``~/.codex/sessions/.../rollout-*.jsonl``): ``session_meta`` (id, cwd),
  ``turn_context`` (model) and ``response_item`` lines whose payload is a Responses item:
  ``function_call`` (``shell`` with an argv, ``exec_command`` with ``cmd``, ``apply_patch``),
  ``custom_tool_call`` (``apply_patch`` with its patch), ``local_shell_call``, each answered by
  a ``*_output`` item with the same ``call_id``; an assistant ``message`` is an answer. The
  last assistant message (or ``task_complete``'s ``last_agent_message``) is the final report;
  a rollout that logs its turns (``event_msg``) and has no ``task_complete`` after its last
  ``user_message`` stopped mid-turn (``truncated``).

A command's exit status is the command's, not a tool failure; an ``apply_patch`` that did not
apply, a ``failed`` status or a declined call is a failed call.
"""

from __future__ import annotations

import json

from claimgrid.classify.transcripts._build import Builder, Transcript, obj, text_of

AGENT = "codex"
_ITEM_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "message")


def is_exec(records: list[dict]) -> bool:
    return any(
        isinstance(r.get("type"), str) and r["type"].split(".")[0] in ("thread", "turn", "item") for r in records[:5]
    ) or any(isinstance(r.get("msg"), dict) and "type" in r["msg"] and "id" in r for r in records[:5])


def is_rollout(records: list[dict]) -> bool:
    return any(
        r.get("type") in ("session_meta", "response_item", "turn_context") and "payload" in r for r in records[:5]
    )


def _output(raw) -> tuple[str | None, int | None]:
    """(text, exit code) of a function_call_output: Codex's JSON ``{"output", "metadata"}``
    form or plain text."""
    if isinstance(raw, dict):
        raw = raw.get("content") if "content" in raw else json.dumps(raw)
    if not isinstance(raw, str):
        return text_of(raw), None
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw, None
    if isinstance(doc, dict) and "output" in doc:
        meta = obj(doc.get("metadata"))
        code = meta.get("exit_code")
        return str(doc.get("output")), code if isinstance(code, int) else None
    return raw, None


def read_exec(records: list[dict], torn: str | None) -> Transcript:
    out = Builder(AGENT)
    if torn:
        out.tear(torn)
    open_items: dict[str, dict] = {}
    begun: dict[str, dict] = {}
    last_message = None
    completed = False
    for r in records:
        kind = r.get("type")
        if kind == "thread.started":
            out.session_id = r.get("thread_id")
        elif kind == "turn.completed":
            completed = True
        elif kind in ("turn.failed", "error"):
            err = obj(r.get("error")) or r
            out.tear(f"{kind}: {str(err.get('message') or '')[:200]}")
        elif kind == "item.started" and isinstance(r.get("item"), dict):
            open_items[str(r["item"].get("id"))] = r["item"]
        elif kind == "item.completed" and isinstance(r.get("item"), dict):
            item = r["item"]
            open_items.pop(str(item.get("id")), None)
            last_message = _item(out, item) or last_message
        elif isinstance(r.get("msg"), dict):  # the older exec --json form
            last_message, done = _msg(out, r["msg"], begun, last_message)
            completed = completed or done
    if open_items:
        out.tear(f"{len(open_items)} item(s) started and never completed: the stream stopped mid-run")
    if not completed:
        out.tear("no turn.completed: the stream stopped mid-run")
    out.final = last_message
    return out.done("codex exec json")


def _item(out: Builder, item: dict) -> str | None:
    kind = item.get("type")
    status = item.get("status")
    if kind in ("agent_message", "assistant_message"):
        text = item.get("text")
        out.answer(text, False)
        return text if isinstance(text, str) else None
    if kind == "command_execution":
        failed = status in ("failed", "declined")
        event = out.tool(
            "shell",
            {"command": item.get("command")},
            item.get("aggregated_output"),
            ok=not failed,
            error=f"command {status}" if failed else None,
        )
        event["exit_code"] = item.get("exit_code")
    elif kind == "file_change":
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        failed = status == "failed"
        event = out.tool(
            "apply_patch", {"changes": changes}, None, ok=not failed, error="patch not applied" if failed else None
        )
        event["paths"] = [c.get("path") for c in changes if isinstance(c.get("path"), str)]
    elif kind == "mcp_tool_call":
        error = item.get("error")
        out.tool(
            f"{item.get('server')}.{item.get('tool')}",
            item.get("arguments"),
            text_of(item.get("result")),
            ok=not error and status != "failed",
            error=str(error) if error else None,
        )
    return None


def _msg(out: Builder, msg: dict, begun: dict[str, dict], last: str | None) -> tuple[str | None, bool]:
    kind = msg.get("type")
    if kind == "session_configured":
        out.model(msg.get("model"))
        out.session_id = msg.get("session_id")
    elif kind == "agent_message":
        out.answer(msg.get("message"), False)
        return msg.get("message") or last, False
    elif kind in ("exec_command_begin", "patch_apply_begin"):
        begun[str(msg.get("call_id"))] = msg
    elif kind == "exec_command_end":
        start = begun.pop(str(msg.get("call_id")), {})
        output = msg.get("aggregated_output") or (msg.get("stdout") or "") + (msg.get("stderr") or "")
        event = out.tool("shell", {"command": start.get("command") or msg.get("command")}, output)
        event["exit_code"] = msg.get("exit_code")
    elif kind == "patch_apply_end":
        start = begun.pop(str(msg.get("call_id")), {})
        changes = obj(start.get("changes"))
        ok = bool(msg.get("success", True))
        event = out.tool(
            "apply_patch",
            {"changes": changes},
            msg.get("stdout"),
            ok=ok,
            error=None if ok else (msg.get("stderr") or "patch not applied"),
        )
        event["paths"] = list(changes)
    elif kind == "task_complete":
        return msg.get("last_agent_message") or last, True
    return last, False


def read_rollout(records: list[dict], torn: str | None) -> Transcript:
    out = Builder(AGENT)
    if torn:
        out.tear(torn)
    outputs: dict[str, dict] = {}
    items: list[dict] = []
    final = None
    events, completed = 0, False
    for r in records:
        payload = r.get("payload") if isinstance(r.get("payload"), dict) else None
        kind = r.get("type")
        if kind == "session_meta" and payload:
            out.session_id = payload.get("id")
            out.cwd = payload.get("cwd")
            out.model(payload.get("model"))
        elif kind == "turn_context" and payload:
            out.cwd = out.cwd or payload.get("cwd")
            out.model(payload.get("model"))
        elif kind == "event_msg" and payload:
            events += 1
            if payload.get("type") == "task_complete":
                final, completed = payload.get("last_agent_message") or final, True
            elif payload.get("type") == "user_message":
                completed = False  # a new turn: complete again only at its task_complete
        item = (
            payload if kind == "response_item" else r if kind in _ITEM_TYPES or str(kind).endswith("_output") else None
        )
        if item is None:
            continue
        if str(item.get("type", "")).endswith("_output"):
            outputs[str(item.get("call_id"))] = item
        else:
            items.append(item)
    last_message = None
    for item in items:
        kind = item.get("type")
        if kind == "message":
            if item.get("role") == "assistant":
                text = text_of(item.get("content"))
                out.answer(text, False)
                last_message = text or last_message
            continue
        answer = outputs.get(str(item.get("call_id")))
        if answer is None:
            out.tear(f"the call {item.get('name') or kind} ({item.get('call_id')}) has no output: read up to it")
            continue
        text, code = _output(answer.get("output"))
        if kind == "local_shell_call":
            action = obj(item.get("action"))
            name, args = "shell", {"command": action.get("command")}
        elif kind == "custom_tool_call":
            name, args = item.get("name"), {"input": item.get("input")}
        else:
            name, args = item.get("name"), item.get("arguments")
        patch = name in ("apply_patch", "applypatch")
        failed = patch and (code not in (0, None) or bool(text and "failed" in text.lower()[:80]))
        event = out.tool(name, args, text, ok=not failed, error=text if failed else None)
        event["exit_code"] = code
    if events and not completed:  # a rollout that logs its turns ends each on task_complete
        out.tear("no task_complete after the last turn: the session stopped mid-turn")
    out.final = final or last_message
    return out.done("codex rollout")
