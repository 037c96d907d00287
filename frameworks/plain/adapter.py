"""The ``plain`` adapter: a model + tool loop with no agent framework, standard library only.

It speaks the OpenAI chat-completions protocol to the harness gateway directly (urllib),
executes the model's tool calls with the harness tools, and stops at the first answer
without tool calls. It is the smallest complete adapter: copy it to add a framework.
"""

from __future__ import annotations

import json
import platform
import urllib.error
import urllib.request

import kit  # frameworks/_harness/kit.py: system prompt, limits, error recording, parity facts

FRAMEWORK = "plain"


def preload() -> None:
    """Import what a run loads (the kit's shared list: only what this venv has)."""
    kit.preload("urllib.request")


def versions() -> dict:
    return kit.versions(FRAMEWORK, python=platform.python_version(), model_client="urllib (stdlib)")


def post(url: str, token: str, body: dict, timeout: float) -> dict:
    """One chat-completions call to the gateway at ``url``; an HTTP error status raises."""
    req = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        # The endpoint's refusal is the run's result: raise it, never turn it into a normal answer.
        raise RuntimeError(
            f"model endpoint answered HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
        ) from None


def tool_specs(tools: list) -> list[dict]:
    """The harness tools as OpenAI function specs, in their order."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def run(ctl: dict, tools: list, rec) -> str | None:
    by_name = {t.name: t for t in tools}
    specs = tool_specs(tools)
    agent = ctl["agent_name"]
    messages = [{"role": "system", "content": kit.system_prompt(ctl)}, {"role": "user", "content": ctl["prompt"]}]
    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model calls", "framework")
    for _ in range(limit):
        resp = post(
            ctl["gateway_url"],
            ctl["token"],
            {"model": ctl["model"], "messages": messages, "tools": specs},
            kit.call_timeout(ctl),
        )
        msg = resp["choices"][0]["message"]
        rec.model_call(agent, resp.get("model"), resp.get("usage") or {})
        calls = msg.get("tool_calls") or []
        messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": calls or None})
        if not calls:
            kit.final_message(rec, agent, msg.get("content") or "")
            return msg.get("content")
        for call in calls:
            name = call["function"]["name"]
            args, problem = kit.parse_args(call["function"].get("arguments") or "{}")
            rec.tool_call(agent, name, args)  # unparseable: the raw string, answered with the problem
            if problem is not None:
                result = f"error: tool arguments are not valid JSON: {problem}"
            else:
                tool = by_name.get(name)
                result = tool(**args) if tool else f"error: unknown tool {name!r}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError(f"model call budget of {ctl['budgets']['max_model_calls']} exhausted without a final answer")
