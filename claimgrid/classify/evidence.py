"""Evidence rules: what the harness counts as a change, a read, and an instruction carried out.

Shared by the verifier (which has the workspace) and the classifier (which has only the
events). Every rule reads harness channels only (``tools`` events), never the agent's words.

* **Change** (``change_evidence``): a tool call changed the workspace when the tool layer's
  before/after snapshot says so (``changed_workspace: true``), whatever the tool: an
  ``edit_file``, a ``write_file`` or a ``run_command`` running ``sed -i`` or ``printf >``.
  Only when the snapshot failed (``changed_workspace: null``) does the tool's category
  (``edit``/``write``, ``ok``) stand in, and the rule says so.
* **Read** (``opened_files``): a file counts as opened when a tool returned its content to
  the agent: ``read_file`` of that path (``ok``); a ``search`` whose result lists a match in
  that file (``path:line: text``); or a ``run_command`` whose output contains the file's
  whole text (trailing whitespace ignored; a file longer than the tool layer's result cap
  counts when the output contains its first ``RESULT_PREFIX`` characters). Output that only
  *mentions* a path (``ls``, ``git status``) is not a read.
* **Instruction in the log** (``check_in_log``): whether a check (``file_exists``,
  ``file_contains``, ``path_changed``, ``tool_called``) held at some point during the run,
  from the tool events, even if the final state no longer shows it.
"""

from __future__ import annotations

import json
import os
import re

RESULT_PREFIX = 4000  # characters; below the tool layer's 16000-character result cap
_SEARCH_HIT = re.compile(r"^(?P<path>[^\n:]+):\d+: ", re.M)


def tool_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("source") == "tools" and e.get("kind") == "tool_call"]


def change_evidence(tools: list[dict]) -> tuple[int, str, dict[str, int]]:
    """(number of workspace-changing calls, rule used, calls that changed it by tool name)."""
    changes, by_tool, fallback = 0, {}, False
    for e in tools:
        changed = e.get("changed_workspace")
        if changed is None:
            fallback = True
            changed = bool(e.get("ok")) and e.get("category") in ("edit", "write")
        if changed:
            changes += 1
            by_tool[e.get("tool") or "?"] = by_tool.get(e.get("tool") or "?", 0) + 1
    rule = "tool layer: edit/write category" if fallback else "tool layer: changed_workspace"
    return changes, rule, by_tool


def _norm(path: str) -> str:
    return os.path.normpath(path)


def opened_files(tools: list[dict], texts: dict[str, str] | None = None) -> dict[str, list[str]]:
    """path -> the rules by which its content reached the agent (see module docstring).

    ``texts`` maps workspace-relative paths to the text the agent could have printed
    (the verifier passes the fixture files); without it, command output is not matched.
    """
    opened: dict[str, list[str]] = {}

    def add(path: str, rule: str):
        rules = opened.setdefault(_norm(path), [])
        if rule not in rules:
            rules.append(rule)

    for e in tools:
        if not e.get("ok") or not isinstance(e.get("args"), dict):
            continue
        tool, result = e.get("tool"), e.get("result") or ""
        if tool == "read_file" and isinstance(e["args"].get("path"), str):
            add(e["args"]["path"], "read_file")
        elif tool == "search":
            for m in _SEARCH_HIT.finditer(result):
                add(m.group("path"), "search match")
        elif tool == "run_command" and texts:
            for path, text in texts.items():
                body = text.rstrip()
                if not body:
                    continue
                if len(body) > RESULT_PREFIX:
                    body = body[:RESULT_PREFIX]
                if body in result:
                    add(path, "command output")
    return opened


def check_in_log(check: dict, tools: list[dict]) -> bool | None:
    """Did ``check`` hold at some point of the run, judged from the tool events alone?

    ``check`` is a task check as a dict (``kind``, ``path``, ``text``, ``tool``,
    ``arg_contains``). None for kinds the log cannot show (``review_verdict``).
    """
    kind, path = check.get("kind"), check.get("path")
    if kind == "tool_called":
        return any(
            e.get("tool") == check.get("tool")
            and e.get("ok")
            and (check.get("arg_contains") or "") in json.dumps(e.get("args"))
            for e in tools
        )
    if kind in ("file_exists", "path_changed"):
        # The file did not exist / was unchanged at the start, so a change to it means it held.
        return any(path in [_norm(p) for p in e.get("changed_paths") or []] for e in tools)
    if kind == "file_contains":
        text = check.get("text") or ""
        for e in tools:
            if path not in [_norm(p) for p in e.get("changed_paths") or []]:
                continue
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            written = " ".join(str(args.get(k, "")) for k in ("content", "new", "command"))
            if text in written:
                return True
        return False
    return None
