"""Tool tables: how the reference models' abstract actions are spelled in an agent's own tools.

A reference policy decides abstract actions, the harness tools of ``claimgrid.vocab.TOOL_NAMES``
(read a file, edit it, run the tests). A coding agent that brings its own tools (Codex CLI's
``exec_command``) offers none of those names, so its ``venvs.toml`` entry names a table
(``tools = "frameworks/<name>/tools.toml"``)::

    agent = "codex"
    [actions.read_file]
    tool = "exec_command"                 # the agent's tool the action is sent as
    category = "read"                     # the harness category it stands for
    arguments = { cmd = "cat {path}" }    # string templates of the tool's arguments

In a template ``{name}`` is the abstract call's argument ``name`` quoted for a POSIX shell
(``shlex.quote``) and ``{name:raw}`` the argument as it is (a command the policy wrote);
``{{`` and ``}}`` are literal braces. Every action of ``TOOL_NAMES`` must be in the table, and
a template may name only the arguments its action has.

An agent that ends only on a tool call, not on a text message (mini-swe-agent ends when a
command's output starts with its sentinel line), also has ``[final_answer]``: the call a
policy's final text is sent as, its templates' one field ``{answer}`` (the text)::

    [final_answer]
    tool = "bash"
    arguments = { command = "printf 'SENTINEL\\n%s\\n' {answer}" }

``load_table(path)`` validates strictly (one-line ``DataError`` naming the file and field);
``ToolTable.spell(call)`` turns one abstract ``ToolCall`` into the agent's. The gateway applies
it to a policy's answer after recording the abstract calls (claimgrid.gateway.scripted), so a
policy's progress, counts and truth are the abstract actions and what the agent receives is its
own tools' spelling. A call whose arguments are not a JSON object (the ``malformed`` model), or
of a tool the table has no action for (``unknown-tool``), is sent unchanged: the agent meets the
fault as the policy wrote it.
"""

from __future__ import annotations

import json
import re
import shlex
import string
from dataclasses import dataclass
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.inputs.schema import Strict, load_toml, validate
from claimgrid.vocab import TOOL_CATEGORY, TOOL_NAMES

# The arguments each abstract action takes (the harness tools' parameters).
ACTION_ARGS = {
    "list_dir": ("path",),
    "read_file": ("path",),
    "search": ("pattern", "path"),
    "write_file": ("path", "content"),
    "edit_file": ("path", "old", "new"),
    "run_command": ("command",),
}
CATEGORIES = ("read", "edit", "write", "bash")


class ActionSpec(Strict):
    tool: str
    category: str
    arguments: dict[str, str]


class FinalSpec(Strict):
    tool: str
    arguments: dict[str, str]


class TableFile(Strict):
    agent: str
    actions: dict[str, ActionSpec]
    final_answer: FinalSpec | None = None


@dataclass(frozen=True)
class Action:
    tool: str
    category: str
    arguments: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ToolTable:
    """One agent's spelling of the abstract actions (module docstring)."""

    agent: str
    actions: dict[str, Action]
    # ``[final_answer]``: (tool, argument templates over ``answer``); None: a text message ends.
    final: tuple[str, tuple[tuple[str, str], ...]] | None = None

    def spell_final(self, text: str) -> tuple[str, str] | None:
        """``(tool, arguments JSON)`` of the call a final text is sent as, None when the agent
        takes a text message as its final answer (no ``[final_answer]``)."""
        if self.final is None:
            return None
        tool, arguments = self.final
        return tool, json.dumps({key: _fill(template, {"answer": text}) for key, template in arguments})

    def read_final(self, tool: str | None, arguments: str | None) -> str | None:
        """The answer text of a call that is this table's final-answer call, else None."""
        if self.final is None:
            return None
        return final_text(self.final[0], dict(self.final[1]), tool, arguments)

    def spell(self, name: str, arguments: str) -> tuple[str, str]:
        """``(tool, arguments JSON)`` of one abstract call as the agent's tools take it;
        unchanged when the table has no action ``name`` or ``arguments`` is not a JSON object."""
        action = self.actions.get(name)
        try:
            given = json.loads(arguments or "{}")
        except (TypeError, ValueError):
            return name, arguments
        if action is None or not isinstance(given, dict):
            return name, arguments
        values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in given.items()}
        out = {key: _fill(template, values) for key, template in action.arguments}
        return action.tool, json.dumps(out)

    def read_back(self, tool: str | None, arguments: str | None) -> tuple[str, dict] | None:
        """The abstract call a call of the agent's ``tool`` with ``arguments`` (JSON) spells:
        ``(action, arguments)`` when they fill one action's templates exactly (the first in
        table order), else None (a call the table does not spell: a model's own command)."""
        try:
            given = json.loads(arguments or "{}")
        except (TypeError, ValueError):
            return None
        if not isinstance(given, dict):
            return None
        for name, action in self.actions.items():
            found = _read_call(dict(action.arguments), given) if action.tool == tool else None
            if found is not None:
                return name, found
        return None

    def tools(self) -> tuple[str, ...]:
        """The agent's tool names the actions are sent as, once each, in table order."""
        return tuple(dict.fromkeys(a.tool for a in self.actions.values()))


def final_text(tool: str, templates: dict[str, str], call_tool: str | None, arguments: str | None) -> str | None:
    """The answer text of a call of ``call_tool`` with ``arguments`` (JSON) when it is the
    final-answer call that ``tool`` and ``templates`` (a table's ``[final_answer]``) spell,
    else None."""
    if call_tool != tool:
        return None
    try:
        given = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return None
    found = _read_call(templates, given) if isinstance(given, dict) else None
    return None if found is None else found.get("answer", "")


def _read_call(templates: dict[str, str], given: dict) -> dict[str, str] | None:
    """The field values with which ``templates`` (argument name -> template) fill exactly the
    arguments ``given``, one value per field across them; None when they do not."""
    if set(given) != set(templates):
        return None
    found: dict[str, str] = {}
    for key, template in templates.items():
        values = _match(template, given[key]) if isinstance(given[key], str) else None
        if values is None or any(found.get(k, v) != v for k, v in values.items()):
            return None
        found.update(values)
    return found


def _fields(template: str) -> list[tuple[str, str | None]]:
    return [(f, spec) for _, f, spec, _ in string.Formatter().parse(template) if f is not None]


def _fill(template: str, values: dict[str, str]) -> str:
    out = []
    for literal, field, spec, _ in string.Formatter().parse(template):
        out.append(literal)
        if field is not None:
            value = values.get(field, "")
            out.append(value if spec == "raw" else shlex.quote(value))
    return "".join(out)


# One POSIX shell word as shlex.quote writes it (quoted pieces and plain characters, joined).
_WORD = r"""((?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^\s'"\\])+)"""


def _match(template: str, text: str) -> dict[str, str] | None:
    """The field values that make ``template`` (filled by ``_fill``) into ``text``, or None."""
    pattern, names = [], []
    for literal, field, spec, _ in string.Formatter().parse(template):
        pattern.append(re.escape(literal))
        if field is not None:
            names.append((field, spec))
            pattern.append("(.*)" if spec == "raw" else _WORD)
    hit = re.fullmatch("".join(pattern), text, re.DOTALL)
    if hit is None:
        return None
    out: dict[str, str] = {}
    for (field, spec), value in zip(names, hit.groups(), strict=True):
        if spec != "raw":
            try:
                words = shlex.split(value)
            except ValueError:
                return None
            if len(words) != 1:
                return None
            value = words[0]
        if out.get(field, value) != value:
            return None
        out[field] = value
    return out


def _check_call(path: Path, where: str, tool: str, arguments: dict[str, str], what: str, allowed) -> None:
    """One spelled call of a table: a tool name, and argument templates that name only the
    fields in ``allowed`` (``{name}`` or ``{name:raw}``); a one-line DataError otherwise."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", tool):
        raise DataError(path, f"{where}.tool", f"'{tool}' is not a tool name")
    for key, template in arguments.items():
        try:
            fields = _fields(template)
        except ValueError as exc:
            raise DataError(path, f"{where}.arguments.{key}", f"bad template: {exc}") from None
        for field, fmt in fields:
            if field not in allowed:
                raise DataError(path, f"{where}.arguments.{key}", f"'{{{field}}}': {what} has {', '.join(allowed)}")
            if fmt not in ("", "raw"):
                raise DataError(path, f"{where}.arguments.{key}", f"'{{{field}:{fmt}}}': the only form is :raw")


def load_table(path: Path | str) -> ToolTable:
    """Read and check one tool table (module docstring)."""
    path = Path(path)
    spec = validate(TableFile, load_toml(path), path)
    missing = [name for name in TOOL_NAMES if name not in spec.actions]
    if missing:
        raise DataError(path, f"actions.{missing[0]}", "required: every harness action needs its spelling")
    actions = {}
    for name, a in spec.actions.items():
        where = f"actions.{name}"
        if name not in ACTION_ARGS:
            raise DataError(path, where, f"is not an action ({', '.join(TOOL_NAMES)})")
        _check_call(path, where, a.tool, a.arguments, name, ACTION_ARGS[name])
        if a.category not in CATEGORIES:
            raise DataError(path, f"{where}.category", f"must be one of {', '.join(CATEGORIES)}")
        if a.category != TOOL_CATEGORY.get(name, a.category):
            raise DataError(path, f"{where}.category", f"'{name}' is a {TOOL_CATEGORY[name]} action")
        actions[name] = Action(a.tool, a.category, tuple(a.arguments.items()))
    final = None
    if spec.final_answer is not None:
        f = spec.final_answer
        _check_call(path, "final_answer", f.tool, f.arguments, "the final answer", ("answer",))
        final = (f.tool, tuple(f.arguments.items()))
    return ToolTable(spec.agent, actions, final)
