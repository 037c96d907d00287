"""SWE-agent ``.traj`` files, mini-swe-agent trajectories and OpenHands event streams.

* **mini-swe-agent** (``{"info": {...}, "messages": [...], "trajectory_format":
  "mini-swe-agent-..."}``): version 1 writes each action as the one ```` ```bash ```` block
  of an assistant message, its observation as the next user message
  (``<returncode>N</returncode><output>...``); version 2 as a ``bash`` tool call whose tool
  message is a JSON observation. Each command is read by what it runs
  (:mod:`claimgrid.classify.shell`). The final report is ``info.submission`` unless it is a
  patch (a SWE-bench submission), then the last assistant message; ``info.exit_status`` other
  than ``Submitted`` says the run stopped before submitting; ``model_stats`` / ``config``
  name the model.
* **SWE-agent** (``{"trajectory": [...], "info": {...}}``, a ``.traj``): each step's ``action``
  (a command line: ``open``, ``edit``, ``str_replace_editor view|create|str_replace``,
  ``submit`` or a shell command) and its ``observation``; the first word (and a
  ``str_replace_editor`` subcommand) is the tool of ``agent_tools.toml``, anything else a
  shell command. The final report is the last step's thought and the submission's status.
* **OpenHands** (a list of events, or ``{"history": [...]}`` as its evaluation output writes):
  an agent ``action`` event (``run``, ``read``, ``edit``, ``write``, ``run_ipython``, ...)
  with ``args``, answered by the observation whose ``cause`` is its id (``error``: failed);
  ``message`` actions are answers, and ``finish``'s ``final_thought`` (or its message) is the
  final report.
"""

from __future__ import annotations

import json
import re

from claimgrid.classify.transcripts._build import Builder, Transcript, obj, text_of

_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)\n?```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# Where OpenHands mounts the repository in its sandbox: its paths are named relative to it.
WORKSPACE = "/workspace"


def is_mini(doc) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and isinstance(doc.get("info"), dict)
        and (str(doc.get("trajectory_format", "")).startswith("mini-swe-agent") or "mini_version" in doc["info"])
    )


def is_swe_agent(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("trajectory"), list) and isinstance(doc.get("info"), dict)


def is_openhands(doc) -> bool:
    events = doc.get("history") if isinstance(doc, dict) else doc
    return (
        isinstance(events, list)
        and bool(events)
        and all(isinstance(e, dict) for e in events)
        and any(("action" in e or "observation" in e) and "source" in e for e in events[:10])
    )


def _submission(text) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    return None if text.lstrip().startswith(("diff --git", "--- a/", "Index: ")) else text


def read_mini(doc: dict) -> Transcript:
    out = Builder("mini-swe-agent")
    info = doc["info"]
    config = obj(info.get("config"))
    model = obj(config.get("model"))
    out.model(model.get("model_name"))
    messages = [m for m in doc["messages"] if isinstance(m, dict)]
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    last = None
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        content = text_of(m.get("content")) or ""
        calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        acted = bool(calls)
        if calls:  # version 2: a bash tool call, its observation a tool message
            for c in calls:
                fn = obj(c.get("function"))
                answer = results.get(c.get("id"))
                if answer is None:
                    out.tear(f"the call {c.get('id')} has no observation: read up to it")
                    continue
                out.tool(fn.get("name") or "bash", fn.get("arguments"), text_of(answer.get("content")))
        else:  # version 1: one ```bash block, its observation the next user message
            block = _BASH_BLOCK.search(content)
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if block is not None and nxt is not None and nxt.get("role") == "user":
                observation = text_of(nxt.get("content")) or ""
                if _RETURNCODE.search(observation) or _SUBMIT not in block.group(1):
                    out.tool("bash", {"command": block.group(1)}, observation)
                acted = True
        out.answer(content, acted)
        if content.strip():
            last = content
    status = info.get("exit_status")
    if status not in (None, "Submitted"):
        out.tear(f"the run stopped before submitting: exit status {status}")
    out.final = _submission(info.get("submission")) or last
    return out.done("mini-swe-agent trajectory")


def _swe_action(out: Builder, action: str, observation) -> None:
    words = action.strip().split(None, 2)
    if not words:
        return
    table = {
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "search_file",
        "search_dir",
        "find_file",
        "create",
        "edit",
        "insert",
        "submit",
    }
    if words[0] == "str_replace_editor" and len(words) >= 2:
        rest = words[2].split() if len(words) > 2 else []
        out.tool(f"str_replace_editor {words[1]}", {"path": rest[0] if rest else None, "command": action}, observation)
    elif words[0] in table:
        rest = action.strip().split()[1:]
        out.tool(words[0], {"path": rest[0] if rest else None, "args": action}, observation)
    else:
        out.tool("bash", {"command": action}, observation)


def read_swe_agent(doc: dict) -> Transcript:
    out = Builder("swe-agent")
    info = doc["info"]
    stats = obj(info.get("model_stats"))
    out.model(
        stats.get("model_name") or (doc.get("replay_config") or {}).get("agent", {}).get("model", {}).get("name")
        if isinstance(doc.get("replay_config"), dict)
        else stats.get("model_name")
    )
    last = None
    for step in doc["trajectory"]:
        if not isinstance(step, dict):
            continue
        action = step.get("action")
        if isinstance(action, str) and action.strip():
            _swe_action(out, action, text_of(step.get("observation")))
        thought = step.get("thought") or step.get("response")
        if isinstance(thought, str) and thought.strip():
            last = thought
    status = info.get("exit_status")
    if status not in (None, "submitted") and not str(status).startswith("submitted"):
        out.tear(f"the run stopped before submitting: exit status {status}")
    out.final = _submission(info.get("submission")) or last
    if out.final:
        out.answer(out.final, False)
    return out.done("swe-agent trajectory")


def read_openhands(doc) -> Transcript:
    events: list[dict] = [
        e for e in (doc.get("history") if isinstance(doc, dict) else doc) or [] if isinstance(e, dict)
    ]
    out = Builder("openhands")
    out.cwd = WORKSPACE
    if isinstance(doc, dict):
        metadata = obj(doc.get("metadata"))
        llm = obj(metadata.get("llm_config"))
        out.model(llm.get("model"))
    answers = {e.get("cause"): e for e in events if "observation" in e and e.get("cause") is not None}
    last = None
    finished = False
    for e in events:
        action = e.get("action")
        if e.get("source") != "agent" or not isinstance(action, str):
            continue
        args = obj(e.get("args"))
        if action == "message":
            text = args.get("content") or e.get("message")
            out.answer(text, False)
            last = text or last
            continue
        if action == "finish":
            finished = True
            last = args.get("final_thought") or args.get("thought") or e.get("message") or last
            if isinstance(args.get("outputs"), dict) and not last:
                last = json.dumps(args["outputs"])
            continue
        if action in ("think", "recall", "system", "null", "change_agent_state"):
            continue
        answer = answers.get(e.get("id"))
        if answer is None:
            out.tear(f"the action {action} ({e.get('id')}) has no observation: read up to it")
            continue
        failed = answer.get("observation") == "error"
        content = text_of(answer.get("content"))
        if action == "edit" and args.get("command") == "view":
            action = "str_replace_editor view"
        elif action == "edit" and args.get("command") == "create":
            action = "str_replace_editor create"
        out.tool(action, args, content, ok=not failed, error=content if failed else None)
        if isinstance(e.get("tool_call_metadata"), dict):
            out.model((e["tool_call_metadata"].get("model_response") or {}).get("model"))
    if not finished:
        out.tear("no finish action: the run stopped before it finished")
    out.final = last
    return out.done("openhands events")
