"""Evidence rules: what the harness counts as a change, a read, an instruction carried out
and a review verdict stated.

Shared by the verifier (which has the workspace) and the classifier and the ledger (which
have only the events). Every rule reads harness channels only (the tool layer's events, the
gateway's record of what the model said), never the agent's report.

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
* **Review verdict** (``review_verdict``): the ``review_verdict`` of the trace in the
  model's last final answer at the gateway (an answered exchange with content and no tool
  call), when it is ``PASS`` or ``FAIL``.

Events are taken as recorded (dicts) or parsed (:mod:`claimgrid.store.events`); the tool and
gateway events handed to a rule are read as those kinds (:func:`parse_as`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from claimgrid.store.events import Events, GatewayExchange, ToolCall, of_kind, parse_as, parse_events
from claimgrid.trace import parse_trace

RESULT_PREFIX = 4000  # characters; below the tool layer's 16000-character result cap
_SEARCH_HIT = re.compile(r"^(?P<path>[^\n:]+):\d+: ", re.M)


def tool_events(events: Events) -> list[ToolCall]:
    """The tool layer's events of a run (``source: tools``, ``kind: tool_call``), in order."""
    return of_kind(parse_events(events), ToolCall)


def change_evidence(tools: Events) -> tuple[int, str, dict[str, int]]:
    """(number of workspace-changing calls, rule used, calls that changed it by tool name)."""
    changes, fallback = 0, False
    by_tool: dict[str, int] = {}
    for e in parse_as(ToolCall, tools):
        changed = e.changed_workspace
        if changed is None:
            fallback = True
            changed = bool(e.ok) and e.category in ("edit", "write")
        if changed:
            changes += 1
            by_tool[e.tool or "?"] = by_tool.get(e.tool or "?", 0) + 1
    rule = "tool layer: edit/write category" if fallback else "tool layer: changed_workspace"
    return changes, rule, by_tool


def _norm(path: str) -> str:
    return os.path.normpath(path)


def opened_files(tools: Events, texts: dict[str, str] | None = None) -> dict[str, list[str]]:
    """path -> the rules by which its content reached the agent (see module docstring).

    ``texts`` maps workspace-relative paths to the text the agent could have printed
    (the verifier passes the fixture files); without it, command output is not matched.
    """
    opened: dict[str, list[str]] = {}

    def add(path: str, rule: str):
        rules = opened.setdefault(_norm(path), [])
        if rule not in rules:
            rules.append(rule)

    for e in parse_as(ToolCall, tools):
        if not e.ok or not isinstance(e.args, dict):
            continue
        tool, result = e.tool, e.result or ""
        if tool == "read_file" and isinstance(e.args.get("path"), str):
            add(e.args["path"], "read_file")
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


def tool_called(tools: Iterable[ToolCall], tool: str | None, arg_contains: str) -> bool:
    """Did the tool layer run ``tool`` (``ok``) with ``arg_contains`` in its JSON arguments?"""
    return any(e.tool == tool and e.ok and arg_contains in json.dumps(e.args) for e in tools)


def check_in_log(check: dict, tools: Events) -> bool | None:
    """Did ``check`` hold at some point of the run, judged from the tool events alone?

    ``check`` is a task check as a dict (``kind``, ``path``, ``text``, ``tool``,
    ``arg_contains``). None for kinds the log cannot show (``review_verdict``).
    """
    calls = parse_as(ToolCall, tools)
    kind, path = check.get("kind"), check.get("path")
    if kind == "tool_called":
        return tool_called(calls, check.get("tool"), check.get("arg_contains") or "")
    if kind in ("file_exists", "path_changed"):
        # The file did not exist / was unchanged at the start, so a change to it means it held.
        return any(path in [_norm(p) for p in e.changed_paths or []] for e in calls)
    if kind == "file_contains":
        text = check.get("text") or ""
        for e in calls:
            if path not in [_norm(p) for p in e.changed_paths or []]:
                continue
            args = e.arg_dict
            written = " ".join(str(args.get(k, "")) for k in ("content", "new", "command"))
            if text in written:
                return True
        return False
    return None


def review_verdict(exchanges: Events) -> str | None:
    """The review verdict the model stated in its last final answer at the gateway (see the
    module docstring); None when there is no final answer or it states none."""
    finals = [e for e in parse_as(GatewayExchange, exchanges) if e.status == 200 and not e.tool_calls and e.content]
    if not finals:
        return None
    trace, _ = parse_trace(finals[-1].content)
    verdict = (trace or {}).get("review_verdict")
    return verdict if verdict in ("PASS", "FAIL") else None
