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
* **Read** (``read_coverage``, ``opened_files``): decided by *line coverage*. For every
  file whose text the verifier has (the fixture's files), each tool output is matched
  line by line against the file: ``read_file`` of that path (``ok``) by content; a
  ``search`` result by its ``path:line: text`` lines; a ``run_command`` output (unwrapped
  first when the agent's shell wraps it, as mini-swe-agent's JSON observation does:
  ``claimgrid.classify.shell.command_output``) whatever the rendering: plain text in order
  (``cat``, ``sed -n`` ranges, ``head``, a pager; ANSI codes stripped) as blocks of at least
  ``MIN_BLOCK`` consecutive file lines, and numbered lines (``cat -n``, ``nl``, ``less -N``,
  ``grep -n``, ``grep -rn``, numbered search output, Claude Code's ``Read``) when the number
  names that line of the file and the text is that line's. Coverage is the share
  of the file's non-blank lines returned by any call of the run (ranges join across calls).
  A file counts as **read** when its coverage is at least ``READ_COVERAGE`` (or, for a file
  longer than one tool result can hold, ``READ_COVERAGE`` of the lines in its first
  ``RESULT_WINDOW`` characters); every file with some coverage is recorded with it, so a
  partial read is visible. A single matching line (a one-line search hit) is a partial read
  of a many-line file, never a read. Output that only *mentions* a path (``ls``, ``git
  status``) covers nothing. Without file texts (records from before this rule), only a
  ``read_file`` of the path counts, as the tool returns the whole file.
* **Instruction in the log** (``check_in_log``): whether a check (``file_exists``,
  ``file_contains``, ``path_changed``, ``tool_called``) held at some point during the run,
  from the tool events, even if the final state no longer shows it.
* **Review verdict** (``review_verdict``): the ``review_verdict`` of the trace in the
  model's last final answer at the gateway (an answered exchange with content and no tool
  call), when it is ``PASS`` or ``FAIL``; without one, the last verdict that answer states
  in words (``claimgrid.classify.claims.stated_verdict``: a verdict label, a separator and a
  pass or fail word, in any language of the claim table).

Events are taken as recorded (dicts) or parsed (:mod:`claimgrid.store.events`); the tool and
gateway events handed to a rule are read as those kinds (:func:`parse_as`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from claimgrid.classify.claims import stated_verdict
from claimgrid.classify.shell import command_output
from claimgrid.store.events import (
    Events,
    GatewayExchange,
    RequestedCall,
    ToolCall,
    TurnChanges,
    of_kind,
    parse_as,
    parse_events,
)
from claimgrid.trace import parse_trace
from claimgrid.vocab import TOOL_ERROR_PREFIX

# A file counts as read when the tool outputs returned at least this share of its non-blank
# lines: "most of it", so a reviewer who skipped a license header or a trailing block still
# read the file, while a handful of search hits does not.
READ_COVERAGE = 0.8
# Characters one tool result can hold (the tool layer's cap on a stored result): a file longer
# than this counts as read when most of the lines within its first window came back.
RESULT_WINDOW = 16000
# Unnumbered output must show at least this many consecutive file lines in order to count
# (one line of plain text could come from anywhere; a numbered line names its place).
MIN_BLOCK = 2
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x08.")
# path:line:text or path:line-text (grep -rn, ripgrep, the search tool's "path:line: text").
_PATH_NUMBERED = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<no>\d+)[:-] ?(?P<text>.*)$")
# line<TAB>text (cat -n, nl), line:text / line-text (grep -n of one file), line  text (less -N),
# line→text (Claude Code's Read: numbered as cat -n, an arrow for the tab).
_NUMBERED = re.compile(r"^\s*(?P<no>\d+)(?:\t|[:-]| +|\u2192)(?P<text>.*)$")


def tool_events(events: Events) -> list[ToolCall]:
    """The tool layer's events of a run (``source: tools``, ``kind: tool_call``), in order."""
    return of_kind(parse_events(events), ToolCall)


def returned_results(exchanges: Events) -> list[str]:
    """The tool results an agent sent back at the gateway, in order: each request's new
    results (``tool_results``), answered or refused (the agent sent them either way), each
    once. A request sent again with the same new results and length is taken once; and since
    the last answer with tool calls, a result with a call id (``tool_result_ids``) already
    taken is not taken again, however the resend was recorded (a refused request's body read
    by its dialect alone, the served one after it). After such an answer an id is new again (a
    model may reuse one)."""
    out: list[str] = []
    previous = None
    window: set[tuple[str, str]] = set()
    for e in parse_as(GatewayExchange, exchanges):
        results = [r or "" for r in e.tool_results or []]
        ids = (
            e.tool_result_ids if isinstance(e.tool_result_ids, list) and len(e.tool_result_ids) == len(results) else []
        )
        key = (e.messages_n, tuple(results))
        if key != previous:
            for n, result in enumerate(results):
                rid = ids[n] if ids else None
                if rid is not None and (rid, result) in window:
                    continue
                if rid is not None:
                    window.add((rid, result))
                out.append(result)
        previous = key
        if e.status == 200 and e.tool_calls:
            window = set()
    return out


def _answered_calls(exchanges: Events) -> list[tuple[int | None, RequestedCall]]:
    """(call index of the answer, call) for every tool call the gateway returned, a resent
    call once (the first answer that carried it)."""
    calls, seen = [], set()
    for e in parse_as(GatewayExchange, exchanges):
        if e.status != 200:
            continue
        for call in e.tool_calls or []:
            key = (call.id, call.name, call.arguments)
            if key not in seen:
                seen.add(key)
                calls.append((e.call_index, call))
    return calls


def turn_attribution(exchanges: Events, turns: Events) -> dict[int | None, TurnChanges]:
    """Which answer's tool calls each turn's change is attributed to: call index -> the
    ``turn_changes`` interval (claimgrid.verify.snapshots) whose writes they made.

    An interval that starts at a request whose answer carried tool calls belongs to those
    calls. One that starts at an answer without any (a side request the agent sent while its
    tools still ran, a final answer) belongs to the latest earlier answer that had tool calls,
    whose tools may still be running; several intervals of one answer are joined. Before any
    answer with tool calls the key is None (the agent's start: no call made it)."""
    with_calls = sorted(
        e.call_index
        for e in parse_as(GatewayExchange, exchanges)
        if e.status == 200 and e.tool_calls and e.call_index is not None
    )
    out: dict[int | None, TurnChanges] = {}
    for turn in parse_as(TurnChanges, turns):
        start = turn.after_call
        owner = max((k for k in with_calls if start is not None and k <= start), default=None)
        if owner in out:
            out[owner] = _joined(out[owner], turn)
        else:
            out[owner] = turn
    return out


def _joined(a: TurnChanges, b: TurnChanges) -> TurnChanges:
    """Two intervals of one answer's tool calls as one: unknown if either is."""
    if a.changed is None or b.changed is None:
        return a if a.changed is None else b
    paths = {c.path: c for c in a.changed} | {c.path: c for c in b.changed}
    return a.model_copy(
        update={
            "changed": list(paths.values()),
            "changed_n": (a.changed_n or 0) + (b.changed_n or 0),
            "before_call": b.before_call,
        }
    )


def own_tool_events(exchanges: Events, table, turns: Events = ()) -> list[dict]:
    """Tool events of an agent with its own tools, read from the gateway: each call the model
    made (answered exchanges, a resent call once) paired in order with the result the agent
    sent back, as the abstract action the agent's tool table (``ToolTable.read_back``) says it
    spells, else as a ``run_command`` of its arguments' text. ``ok`` means a result came back
    that does not start with ``TOOL_ERROR_PREFIX`` (a failed result, as the harness tool layer and
    the Messages dialect's ``is_error`` write it). ``changed_workspace`` / ``changed_paths``
    come from the turn snapshots (``turns``, :func:`turn_attribution`): every call of one
    answer gets that answer's change, as the snapshots cannot tell its calls apart; None
    without snapshots or when one was not taken. Calls without a result are left out. Never
    stored as tool-layer events: what the verifier reads for an agent whose calls did not
    pass the harness tool layer."""
    owned = turn_attribution(exchanges, turns)
    out = []
    for seq, ((index, call), result) in enumerate(
        zip(_answered_calls(exchanges), returned_results(exchanges), strict=False)
    ):
        back = table.read_back(call.name, call.arguments) if table is not None else None
        tool, args = back if back is not None else ("run_command", {"command": call.arguments or ""})
        turn = owned.get(index)
        changed = None if turn is None or turn.changed is None else [c.path for c in turn.changed]
        failed = result.startswith(TOOL_ERROR_PREFIX)
        out.append(
            {
                "source": "tools",
                "kind": "tool_call",
                "seq": seq,
                "tool": tool,
                "args": args,
                "ok": not failed,
                "error": result[len(TOOL_ERROR_PREFIX) :] if failed else None,
                "result": result,
                "changed_workspace": None if changed is None else bool(changed),
                "changed_paths": changed,
            }
        )
    return out


def own_change_evidence(exchanges: Events, turns: Events) -> tuple[int | None, str | None, dict[str, int]]:
    """(turns whose snapshots show a change, why the count is unknown, calls by tool name that
    a change is attributed to) for an agent with its own tools (:func:`turn_attribution`).
    The count is None, with the reason of the first snapshot not taken, when a snapshot is
    missing and no turn shows a change: a write undone in the unseen interval cannot be ruled
    out."""
    turns = parse_as(TurnChanges, turns)
    changed = sum(1 for t in turns if t.changed_n)
    missing = next((t.reason or "snapshot not taken" for t in turns if t.changed_n is None), None)
    by_tool: dict[str, int] = {}
    calls: dict[int | None, list[RequestedCall]] = {}
    for index, call in _answered_calls(exchanges):
        calls.setdefault(index, []).append(call)
    for index, turn in turn_attribution(exchanges, turns).items():
        if turn.changed_n:
            for call in calls.get(index, []):
                by_tool[call.name or "?"] = by_tool.get(call.name or "?", 0) + 1
    if missing is not None and changed == 0:
        return None, missing, by_tool
    return changed, None, by_tool


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


class _File:
    """One file's lines as the verifier saw them: stripped text by 1-based number."""

    def __init__(self, text: str):
        self.lines = [line.rstrip() for line in text.splitlines()]
        self.content = [i for i, line in enumerate(self.lines) if line.strip()]  # non-blank, 0-based
        self.where: dict[str, list[int]] = {}  # text -> positions in ``content``
        for pos, i in enumerate(self.content):
            self.where.setdefault(self.lines[i], []).append(pos)
        if len(text) > RESULT_WINDOW:  # the lines one result can show
            window = text[:RESULT_WINDOW].count("\n")
            self.counted = [i for i in self.content if i < window]
        else:
            self.counted = self.content

    def numbered(self, no: int, text: str) -> int | None:
        """The 0-based index of line ``no`` when ``text`` is that line's (stripped) text."""
        i = no - 1
        if 0 <= i < len(self.lines) and self.lines[i].strip() and self.lines[i].strip() == text.strip():
            return i
        return None

    def blocks(self, out: list[str], min_block: int) -> set[int]:
        """Indices of file lines appearing in ``out`` as runs of >= ``min_block`` consecutive
        non-blank file lines in order (blank lines inside a run are neither required nor counted)."""
        got: set[int] = set()
        plain = [line for line in out if line.strip()]
        j = 0
        while j < len(plain):
            best: list[int] = []
            for start in self.where.get(plain[j], ()):
                run, k, pos = [self.content[start]], j + 1, start + 1
                while k < len(plain) and pos < len(self.content) and plain[k] == self.lines[self.content[pos]]:
                    run.append(self.content[pos])
                    k, pos = k + 1, pos + 1
                if len(run) > len(best):
                    best = run
            if len(best) >= min(min_block, len(self.content)):
                got.update(best)
                j += len(best)
            else:
                j += 1
        return got


def _output_lines(result: str) -> list[str]:
    return [_ANSI.sub("", line).rstrip() for line in result.splitlines()]


def read_coverage(tools: Events, texts: dict[str, str] | None = None) -> dict[str, dict]:
    """path -> {"coverage": share of its non-blank lines returned (0..1, 3 decimals),
    "lines": its non-blank lines counted, "rules": the tools that returned them} for every
    file with a known text that any tool output covered at all (see the module docstring).

    ``texts`` maps workspace-relative paths to the text the tools could have returned (the
    verifier passes the fixture files); without it no coverage can be measured and the
    result is empty."""
    files = {_norm(p): _File(t) for p, t in (texts or {}).items() if t.strip()}
    seen: dict[str, set[int]] = {}
    rules: dict[str, list[str]] = {}

    def add(path: str, indices: set[int], rule: str):
        if not indices:
            return
        seen.setdefault(path, set()).update(indices)
        if rule not in rules.setdefault(path, []):
            rules[path].append(rule)

    for e in parse_as(ToolCall, tools):
        if not e.ok or not isinstance(e.args, dict):
            continue
        tool = e.tool
        # A shell's output as the command printed it: an agent that wraps it (mini-swe-agent's
        # JSON observation) is unwrapped by the one shell parser (claimgrid.classify.shell).
        out = _output_lines(command_output(e.result) if tool == "run_command" else e.result or "")
        if tool == "read_file" and isinstance(e.args.get("path"), str):
            path = _norm(e.args["path"])
            if path in files:
                # The harness's read_file returns the whole file from its start, up to the tool
                # layer's own output cap (and the stored event keeps only its head and tail): the
                # agent got all the harness would give, so the file is read whole.
                add(path, set(files[path].counted), "read_file")
            continue
        if tool not in ("search", "run_command"):
            continue
        rule = "search match" if tool == "search" else "command output"
        numbered: dict[str, set[int]] = {}
        for line in out:
            m = _PATH_NUMBERED.match(line)
            if m and _norm(m.group("path")) in files:
                i = files[_norm(m.group("path"))].numbered(int(m.group("no")), m.group("text"))
                if i is not None:
                    numbered.setdefault(_norm(m.group("path")), set()).add(i)
                continue
            m = _NUMBERED.match(line)
            if m and tool == "run_command":
                for path, f in files.items():
                    i = f.numbered(int(m.group("no")), m.group("text"))
                    if i is not None:
                        numbered.setdefault(path, set()).add(i)
        for path, indices in numbered.items():
            add(path, indices, rule)
        if tool == "run_command":
            for path, f in files.items():
                add(path, f.blocks(out, MIN_BLOCK), rule)
    out_map = {}
    for path, indices in seen.items():
        f = files[path]
        counted = set(f.counted)
        share = len(indices & counted) / len(counted) if counted else 0.0
        out_map[path] = {"coverage": round(share, 3), "lines": len(counted), "rules": rules[path]}
    return out_map


def opened_files(tools: Events, texts: dict[str, str] | None = None) -> dict[str, list[str]]:
    """path -> the rules by which its content reached the agent, for every file *read*:
    coverage at least ``READ_COVERAGE`` (:func:`read_coverage`). A ``read_file`` of a path
    whose text is not known (a file the agent wrote, a record without file texts) counts as
    a read by the rule ``read_file``: the tool returns the whole file."""
    known = {_norm(p) for p, t in (texts or {}).items() if t.strip()}
    opened = {p: c["rules"] for p, c in read_coverage(tools, texts).items() if c["coverage"] >= READ_COVERAGE}
    for e in parse_as(ToolCall, tools):
        if e.ok and e.tool == "read_file" and isinstance(e.args, dict) and isinstance(e.args.get("path"), str):
            path = _norm(e.args["path"])
            if path not in known:
                opened.setdefault(path, ["read_file"])
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
    # A framework that ends on a final-answer tool call: that call's text (``final_answer``).
    finals = [
        e.final_answer if e.final_answer is not None else e.content
        for e in parse_as(GatewayExchange, exchanges)
        if e.status == 200 and (e.final_answer is not None or (not e.tool_calls and e.content))
    ]
    if not finals:
        return None
    trace, _ = parse_trace(finals[-1])
    verdict = (trace or {}).get("review_verdict")
    if verdict in ("PASS", "FAIL"):
        return verdict
    # No verdict field: a verdict stated in words ("Verdict: FAIL", "判定：合格") is the deliverable.
    stated = stated_verdict(finals[-1])
    return stated[0] if stated else None
