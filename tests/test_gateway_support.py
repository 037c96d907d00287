"""Helpers for the gateway tests (no tests here): a shared gateway, scripts, a tool loop.

The tool loop executes the reference models' tool calls with plain Python against a
temporary copy of a task fixture, so the tests see what a framework would see.
"""

from __future__ import annotations

import atexit
import json
import shutil
import threading
import uuid
from functools import lru_cache
from pathlib import Path

from claimgrid.gateway import Gateway, RunScript
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.reference.script import CallLimits

from tests import loopback_http

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": params},
        },
    }
    for name, params in [
        ("list_dir", ["path"]),
        ("read_file", ["path"]),
        ("search", ["pattern", "path"]),
        ("write_file", ["path", "content"]),
        ("edit_file", ["path", "old", "new"]),
        ("run_command", ["command"]),
    ]
]


_GATEWAY: list[Gateway] = []
_GATEWAY_LOCK = threading.Lock()


def shared_gateway() -> Gateway:
    """One started gateway for the whole test session."""
    with _GATEWAY_LOCK:
        if not _GATEWAY:
            gw = Gateway()
            gw.start()
            atexit.register(gw.stop)
            _GATEWAY.append(gw)
        return _GATEWAY[0]


@lru_cache(maxsize=1)
def conditions():
    return load_content_conditions(), load_swap_conditions()


def script(
    task,
    model="diligent",
    content="clean",
    swap="none",
    substitute="reader",
    max_model_calls=24,
    run_id=None,
    model_call_timeout_s=15.0,
) -> RunScript:
    cc, sc = conditions()
    return RunScript.for_cell(
        run_id or f"r-{uuid.uuid4().hex[:8]}",
        task,
        cc[content],
        sc[swap],
        model,
        substitute,
        task.role,
        limits=CallLimits(max_model_calls=max_model_calls, model_call_timeout_s=model_call_timeout_s),
    )


def register(task, **kw) -> tuple[str, RunScript]:
    s = script(task, **kw)
    token = f"tok-{uuid.uuid4().hex}"
    shared_gateway().register(token, s)
    return token, s


def workspace(task, tmp_path: Path, content="clean") -> Path:
    cc, _ = conditions()
    ws = tmp_path / f"ws-{uuid.uuid4().hex[:6]}"
    shutil.copytree(task.repo, ws)
    (ws / task.spec.content_slot).write_text(cc[content].render(task))
    return ws


def run_tool(ws: Path, name: str, arguments: str) -> str:
    """Execute one tool call against ``ws``; errors become "ERROR: ..." results, as a framework's."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return "ERROR: tool arguments are not valid JSON"
    try:
        if name == "list_dir":
            return "\n".join(sorted(p.name for p in (ws / args.get("path", ".")).iterdir()))
        if name == "read_file":
            return (ws / args["path"]).read_text()
        if name == "search":
            hits = [
                str(p.relative_to(ws))
                for p in (ws / args.get("path", ".")).rglob("*")
                if p.is_file() and args["pattern"] in p.read_text(errors="replace")
            ]
            return "\n".join(hits) or "no matches"
        if name == "write_file":
            (ws / args["path"]).parent.mkdir(parents=True, exist_ok=True)
            (ws / args["path"]).write_text(args["content"])
            return "written"
        if name == "edit_file":
            path = ws / args["path"]
            text = path.read_text()
            if text.count(args["old"]) != 1:
                return "ERROR: 'old' text not found exactly once"
            path.write_text(text.replace(args["old"], args["new"]))
            return "edited"
        if name == "run_command":
            return "(the test tool loop does not run commands) exit 0"
    except (OSError, KeyError, TypeError, AttributeError) as exc:  # a wrong-typed argument too
        return f"ERROR: {exc}"
    return f"ERROR: unknown tool {name}"


def changed(task, ws: Path) -> set[str]:
    """Paths that differ from the fixture (the content slot excluded)."""
    out = set()
    for p in ws.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(ws))
            orig = task.repo / rel
            if rel != task.spec.content_slot and (not orig.exists() or orig.read_bytes() != p.read_bytes()):
                out.add(rel)
    return out


# -- clients -------------------------------------------------------------------------------


def http_turn(
    url: str, token: str, model: str, messages: list, stream: bool, capture: list | None = None
) -> tuple[dict, dict]:
    """One raw-HTTP call; returns (assistant message dict, info with status/model/usage/headers).

    ``capture`` collects (headers, body text) of every response, exactly as received.
    """
    body = {"model": model, "messages": messages, "tools": TOOLS}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    headers = {"Authorization": f"Bearer {token}"}
    r = loopback_http.post(f"{url}/chat/completions", json=body, headers=headers, timeout=30)
    info = {"status": r.status_code, "headers": dict(r.headers)}
    if capture is not None:
        capture.append((dict(r.headers), r.text))
    if r.status_code != 200:
        info["error"] = r.json()["error"]
        return {}, info
    if not stream:
        data = r.json()
        info |= {"model": data["model"], "usage": data["usage"]}
        return data["choices"][0]["message"], info
    assert r.headers["content-type"].startswith("text/event-stream")
    message: dict = {"role": "assistant", "content": ""}
    calls: dict[int, dict] = {}
    lines = [ln for ln in r.text.split("\n") if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for ln in lines[:-1]:
        chunk = json.loads(ln[6:])
        info["model"] = chunk["model"]
        if chunk.get("usage"):
            info["usage"] = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc["index"], {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                info["finish_reason"] = choice["finish_reason"]
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    message["content"] = message["content"] or None
    return message, info


def litellm_turn(url: str, token: str, model: str, messages: list, stream: bool) -> tuple[dict, dict]:
    import litellm

    kwargs = dict(
        model=f"openai/{model}",
        api_base=url,
        api_key=token,
        messages=messages,
        tools=TOOLS,
        max_retries=0,
        num_retries=0,
    )
    try:
        if stream:
            chunks = list(litellm.completion(stream=True, stream_options={"include_usage": True}, **kwargs))
            resp = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            resp = litellm.completion(**kwargs)
    except litellm.exceptions.APIError as exc:  # every LiteLLM HTTP error derives from it or OpenAIError
        return {}, {"status": exc.status_code, "error": {"message": str(exc)}}
    except Exception as exc:
        status = getattr(exc, "status_code", None)
        if status is None:
            raise
        return {}, {"status": status, "error": {"message": str(exc)}}
    msg = resp.choices[0].message
    message = {"role": "assistant", "content": msg.content}
    if msg.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls
        ]
    usage = resp.usage
    return message, {
        "status": 200,
        "model": resp.model,
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        "headers": dict((getattr(resp, "_hidden_params", {}) or {}).get("additional_headers") or {}),
    }


def drive(turn, url, token, model, task, ws: Path, stream: bool, max_turns: int = 30):
    """Run the agent loop: call the model, execute its tool calls, until it stops or fails.

    Returns (final assistant message or None, list of per-call info dicts, messages).
    """
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": task.spec.prompt}]
    infos = []
    for _ in range(max_turns):
        message, info = turn(url, token, model, messages, stream)
        infos.append(info)
        if info["status"] != 200:
            return None, infos, messages
        messages.append(message)
        if not message.get("tool_calls"):
            return message, infos, messages
        for call in message["tool_calls"]:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": run_tool(ws, call["function"]["name"], call["function"]["arguments"]),
                }
            )
    return None, infos, messages
