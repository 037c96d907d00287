"""What every reader builds: the ``Transcript``, its tool events, the agents' tool table.

A reader turns its form's records into calls of :class:`Builder` (``tool``, ``answer``,
``final``, ``model``, ``tear``) and gets a :class:`Transcript`; what a tool does is decided
here, once, from ``agent_tools.toml`` (one data table for every agent) and, for a shell
command, from :mod:`claimgrid.classify.shell`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from claimgrid.classify.outcomes import ExternalOutcome
from claimgrid.classify.shell import patch_paths, shell_effects
from claimgrid.errors import DataError
from claimgrid.inputs.schema import load_toml
from claimgrid.vocab import TOOL_CATEGORY

TABLE = Path(__file__).resolve().parent.parent / "agent_tools.toml"
CATEGORIES = ("read", "edit", "write", "bash", "delegate", "none")
# A tool outside the harness's six and the table counts by what its name says it does.
_NAME_CATEGORY = (
    (("edit", "replace", "patch", "str_replace"), "edit"),
    (("write", "create", "save"), "write"),
    (("bash", "shell", "run", "exec", "command", "terminal"), "bash"),
    (("read", "view", "open", "cat", "list", "ls", "search", "grep", "find", "glob"), "read"),
)


@dataclass(frozen=True)
class ToolSpec:
    """One agent tool's row of ``agent_tools.toml``: its category, the argument holding a shell
    command (``command``) or the file it reads or changes (``path``), and the harness tool it
    is the same as (``harness``: its arguments then renamed to the harness's)."""

    category: str
    command: str | None = None
    path: str | None = None
    harness: str | None = None
    patch: str | None = None
    # A read whose range arguments are set is a partial read, not the harness's whole-file read.
    partial_if: tuple[str, ...] = ()


@cache
def tool_table() -> dict[str, dict[str, ToolSpec]]:
    """agent -> tool name -> :class:`ToolSpec`, from ``agent_tools.toml``."""
    raw = load_toml(TABLE)
    out: dict[str, dict[str, ToolSpec]] = {}
    for agent, tools in raw.items():
        if not isinstance(tools, dict):
            raise DataError(TABLE, agent, "must be a table of tools")
        out[agent] = {}
        for name, spec in tools.items():
            if not isinstance(spec, dict) or spec.get("category") not in CATEGORIES:
                raise DataError(TABLE, f"{agent}.{name}.category", f"must be one of {', '.join(CATEGORIES)}")
            unknown = set(spec) - {"category", "command", "path", "harness", "patch", "partial_if"}
            if unknown:
                raise DataError(TABLE, f"{agent}.{name}", f"unknown field {sorted(unknown)[0]!r}")
            out[agent][name] = ToolSpec(
                spec["category"],
                spec.get("command"),
                spec.get("path"),
                spec.get("harness"),
                spec.get("patch"),
                tuple(spec.get("partial_if", ())),
            )
    return out


def category_of(name: str, agent: str | None = None) -> str | None:
    """The category of a tool name: the agent's row of the table, the harness's six, else the
    one its name says."""
    spec = tool_table().get(agent or "", {}).get(name)
    if spec is not None:
        return spec.category
    if name in TOOL_CATEGORY:
        return TOOL_CATEGORY[name]
    low = name.lower()
    for words, category in _NAME_CATEGORY:
        if any(w in low for w in words):
            return category
    return None


def obj(value) -> dict:
    """``value`` when it is a JSON object, else an empty one (a record's missing or odd field)."""
    return value if isinstance(value, dict) else {}


def text_of(value) -> str | None:
    """Message content as text: a string, or the text parts of a list of parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text") if p.get("text") is not None else p.get("content")
                if isinstance(t, str) and p.get("type") in (None, "text", "output_text", "input_text"):
                    parts.append(t)
        return "".join(parts)
    return json.dumps(value, default=str)


def args_of(value):
    if isinstance(value, str):
        try:
            return json.loads(value or "{}")
        except ValueError:
            return value
    return value


@dataclass
class Subagent:
    """A sidechain of a run (a Claude Code ``Task`` subagent, a Codex subagent thread): its own
    tool events and last answer, attributed, never mixed with the main agent's report."""

    id: str
    name: str | None = None
    events: list[dict] = field(default_factory=list)
    final_report: str | None = None


@dataclass
class Transcript:
    """One run's transcript as events (the public face of :func:`read_transcript`).

    ``form``: which form it was read as (``FORMS``); ``events``: ``tools`` events in call order
    (each with ``agent_tool``, the agent's own tool name, and ``subagent``, the sidechain that
    made it or None), then a ``gateway`` exchange per model answer without a tool call (or, for
    claimgrid's own events, every event it stored but the verifier's and the agent's);
    ``final_report``: the agent's last report as the transcript holds it (None: none);
    ``agent``: the agent program that wrote it (``claude-code``, ``codex``, ...; None: not
    said); ``models``: the model names its answers carried, in first-seen order;
    ``truncated_reason``: why the transcript stops short (a torn line, no final record), None
    when it is whole; ``subagents``: the sidechains by id; ``session_id``; ``outcome``: the
    verdict another harness recorded beside it (a Harbor trial's ``result.json``), else None."""

    form: str
    events: list[dict] = field(default_factory=list)
    final_report: str | None = None
    agent: str | None = None
    models: list[str] = field(default_factory=list)
    truncated_reason: str | None = None
    subagents: dict[str, Subagent] = field(default_factory=dict)
    session_id: str | None = None
    outcome: ExternalOutcome | None = None

    @property
    def truncated(self) -> bool:
        return self.truncated_reason is not None

    @property
    def has_process(self) -> bool:
        return any(e.get("source") == "process" for e in self.events)

    @property
    def tool_events(self) -> list[dict]:
        return [e for e in self.events if e.get("source") == "tools"]


def _relative(path, cwd: str | None):
    """A path under the run's working folder as the repository names it."""
    if not isinstance(path, str) or not cwd or not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


class Builder:
    """Collects one transcript's events in order (module docstring)."""

    def __init__(self, agent: str | None = None) -> None:
        self.agent = agent
        self.tools: list[dict] = []
        self.answers: list[dict] = []
        self.final: str | None = None
        self.models: list[str] = []
        self.torn: str | None = None
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.subagents: dict[str, Subagent] = {}
        self.outcome: ExternalOutcome | None = None

    def model(self, name) -> None:
        if isinstance(name, str) and name and name not in self.models:
            self.models.append(name)

    def tear(self, why: str) -> None:
        """The transcript stops short: the first reason is kept."""
        if self.torn is None:
            self.torn = why

    def tool(
        self,
        name,
        args,
        result,
        ok: bool = True,
        error: str | None = None,
        subagent: str | None = None,
    ) -> dict:
        """One tool call: its category from the agent's table row, a shell command's from what
        it runs (:func:`claimgrid.classify.shell.shell_effects`), a harness-equivalent tool
        renamed to the harness's so the evidence rules read it as they read a grid run's."""
        name = str(name or "")
        args = args_of(args)
        spec = tool_table().get(self.agent or "", {}).get(name)
        event: dict = {
            "source": "tools",
            "kind": "tool_call",
            "seq": len(self.tools),
            "tool": name,
            "agent_tool": name,
            "category": category_of(name, self.agent),
            "args": args,
            "ok": ok,
            "error": error,
            "result": result if result is None or isinstance(result, str) else json.dumps(result, default=str),
            "changed_workspace": None,  # not observed: the edit/write category rule applies
            "subagent": subagent,
            # a call of the agent's own tool, read by what it does (claimgrid.classify.classifier
            # holds no self-reported breakdown by category against it)
            "own_tool": self.agent is not None,
        }
        command = None
        if spec is not None and spec.command is not None:
            command = args.get(spec.command) if isinstance(args, dict) else args if isinstance(args, str) else None
            if isinstance(command, list):  # Codex's argv form: ["bash", "-lc", "cmd"]
                command = (
                    command[-1] if len(command) >= 3 and command[1] in ("-c", "-lc") else " ".join(map(str, command))
                )
        elif name == "run_command" and isinstance(args, dict):
            command = args.get("command")
        if isinstance(command, str):
            effects = shell_effects(command)
            event.update(
                tool="run_command",
                args={"command": command},
                category=effects.category,
                shell=effects.to_json(),
                paths=list(effects.changes) or None,
            )
        elif spec is not None and spec.patch is not None:
            body = args.get(spec.patch) if isinstance(args, dict) else args
            if isinstance(body, str):
                event["paths"] = [_relative(p, self.cwd) for p in patch_paths(body)] or None
        elif spec is not None and spec.path is not None and isinstance(args, dict):
            path = _relative(args.get(spec.path), self.cwd)
            event["paths"] = [path] if isinstance(path, str) else None
            partial = any(args.get(k) not in (None, "", 0) for k in spec.partial_if)
            if spec.harness and not partial and isinstance(path, str):
                event.update(tool=spec.harness, args={**args, "path": path})
        self.tools.append(event)
        return event

    def answer(self, content: str | None, has_calls: bool, model: str | None = None) -> None:
        """What the model said without calling a tool: where a review verdict is read from."""
        self.model(model)
        if content and not has_calls:
            self.answers.append(
                {
                    "source": "gateway",
                    "kind": "exchange",
                    "call_index": len(self.answers),
                    "status": 200,
                    "content": content,
                }
            )

    def done(self, form: str) -> Transcript:
        final = self.final
        if final is None and self.answers:
            final = self.answers[-1]["content"]
        return Transcript(
            form,
            self.tools + self.answers,
            final_report=final,
            agent=self.agent,
            models=self.models,
            truncated_reason=self.torn,
            subagents=self.subagents,
            session_id=self.session_id,
            outcome=self.outcome,
        )


def json_lines(raw: bytes) -> tuple[list[dict], str | None]:
    """The JSON objects of a JSON-lines text, and why it stops short (None: every line whole).
    A line that is not a JSON object ends the reading there: a torn or mid-stream file is read
    as far as it goes, never past a line it cannot read."""
    out: list[dict] = []
    lines = raw.decode("utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            last = number == len(lines) or not any(x.strip() for x in lines[number:])
            return out, f"line {number} is {'torn' if last else 'not JSON'}: read up to it"
        if not isinstance(doc, dict):
            return out, f"line {number} is not a JSON object: read up to it"
        out.append(doc)
    return out, None
