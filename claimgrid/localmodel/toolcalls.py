"""How the local server tells a model about tools and reads its tool calls back.

The engine applies a chat template through llama.cpp's C API (``llama_chat_apply_template``),
which renders roles and text only: no template there has a slot for tools. So, the rule:

* **Telling.** When a request offers ``tools``, a system message (before the request's own,
  or merged into its first system message) lists them in the Hermes/Qwen convention: each
  function's ``{"name", "description", "parameters"}`` as JSON inside ``<tools></tools>``,
  and the instruction to answer a call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
  ``tool_choice: "required"`` or a named function adds one sentence saying so; ``"none"``
  offers no tools. Earlier turns are rendered the same way: an assistant message's
  ``tool_calls`` as ``<tool_call>`` blocks, a ``tool`` message as a user turn holding
  ``<tool_response>...</tool_response>``.
* **Reading.** :func:`parse_tool_calls` (only when tools were offered): every
  ``<tool_call>...</tool_call>`` block (a last one may lack its closing tag) whose body is a
  JSON object with a string ``"name"`` and an ``"arguments"`` object (or a string holding a
  JSON object; absent: ``{}``) is one call; else, when the whole answer (an optional
  Markdown code fence around it) is one such JSON object, that is one call. Anything else,
  a block with broken JSON included, is no call: the text stays content. Names are not
  checked against the offered tools: a call of a tool that does not exist is what the model
  did, and the framework's handling of it is recorded.
* The message's ``content`` is always the model's raw text, verbatim (the tool-call blocks
  included), so the gateway's exchange record shows what the model produced and
  ``tool_calls`` shows what this rule read from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)


def tools_prompt(tools: list, tool_choice: Any) -> str | None:
    """The system text that offers ``tools`` (None: no tools, or ``tool_choice`` "none")."""
    funcs: list[dict] = [
        t["function"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    if not funcs or tool_choice == "none":
        return None
    lines = [
        "You may call one or more functions to assist with the user query.",
        "You are provided with function signatures within <tools></tools> XML tags:",
        "<tools>",
        *(
            json.dumps(
                {"name": f.get("name"), "description": f.get("description", ""), "parameters": f.get("parameters", {})},
                ensure_ascii=False,
            )
            for f in funcs
        ),
        "</tools>",
        "For each function call, return a JSON object with the function name and arguments "
        "within <tool_call></tool_call> XML tags:",
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
    ]
    if tool_choice == "required":
        lines.append("You must call at least one function.")
    elif isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        lines.append(f"You must call the function {tool_choice['function'].get('name')}.")
    return "\n".join(lines)


def render_messages(messages: list, tools: list | None, tool_choice: Any) -> list[dict[str, str]]:
    """The request's messages as (role, text) pairs a role-and-text template renders."""
    out: list[dict[str, str]] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, text = str(m.get("role") or "user"), _text(m.get("content"))
        if role == "developer":
            role = "system"
        if role == "assistant" and m.get("tool_calls") and "<tool_call>" not in text:
            blocks = []
            for c in m["tool_calls"]:
                fn = (c or {}).get("function") or {}
                args = fn.get("arguments")
                try:
                    args = json.loads(args) if isinstance(args, str) else (args or {})
                except ValueError:
                    pass  # sent back as the string it was
                blocks.append(
                    "<tool_call>\n"
                    + json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
                    + "\n</tool_call>"
                )
            text = "\n".join([text, *blocks]).strip()
        elif role in ("tool", "function"):
            role, text = "user", f"<tool_response>\n{text}\n</tool_response>"
        out.append({"role": role, "content": text})
    offer = tools_prompt(tools or [], tool_choice)
    if offer is not None:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + offer}
        else:
            out.insert(0, {"role": "system", "content": offer})
    # Consecutive turns of one role (two tool results in a row) become one: templates such
    # as Gemma's require the roles to alternate.
    merged: list[dict[str, str]] = []
    for m in out:
        if merged and merged[-1]["role"] == m["role"] and m["role"] != "system":
            merged[-1] = {"role": m["role"], "content": merged[-1]["content"] + "\n\n" + m["content"]}
        else:
            merged.append(m)
    return merged


def _call(body: str) -> dict | None:
    try:
        obj = json.loads(body.strip())
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)}


def parse_tool_calls(text: str) -> list[dict]:
    """The tool calls ``text`` holds by the rule above, as OpenAI ``tool_calls`` entries
    with ids derived from the text (the same text gives the same ids)."""
    calls = [c for c in (_call(b) for b in BLOCK.findall(text)) if c is not None]
    if not calls and "<tool_call>" not in text:
        stripped = text.strip()
        fenced = FENCE.match(stripped)
        one = _call(fenced.group(1) if fenced else stripped)
        calls = [one] if one is not None else []
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return [{"id": f"call_{digest}_{i}", "type": "function", "function": c} for i, c in enumerate(calls)]
