"""The six workspace tools: their specs (name, description, JSON schema), their
implementations, and the context that runs a call and records it.

Stdlib only; runs inside each framework's venv (Python 3.11).

* ``make_tools(ctl, channel)`` returns ``HarnessTool`` objects for the names in
  ``ctl["tools"]``. Each has ``.name``, ``.description``, ``.parameters`` (JSON schema),
  ``.category`` and ``__call__(**kwargs) -> str``.
* A tool never raises into the framework. Refused paths, bad arguments and failures
  come back as an ``"ERROR: ..."`` string, and the event says ``ok: false``.
* Every call, refused or not, is one ``source: tools`` event sent on the channel;
  ``changed_workspace`` / ``changed_paths`` come from a snapshot of the workspace
  before and after the call, never from the tool's name.
* Every implementation returns a :class:`ToolOutcome`; file paths go through the
  workspace jail (workspace_jail.py), commands through the command sandbox
  (command_sandbox.py).
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field

from command_sandbox import OUTPUT_KEEP_BYTES, CommandSandbox
from harness_shared.probe_kinds import ToolFaultKind
from tool_faults import ToolFaultHook
from tools_channel import ToolChannel
from workspace_jail import Jail, ToolRefused, diff_snapshots

RESULT_EVENT_CHARS = 16000
SEARCH_MAX_HITS = 200
SEARCH_MAX_FILE = 2 << 20
# The bounds below arrive from the driver in ctl["budgets"] (claimgrid/caps.py states each one
# and its reason); these defaults are the same figures, for a control that names none.
READ_MAX_BYTES = 1 << 20  # read_file: bytes read from the start of a file, the rest never read
EDIT_MAX_BYTES = 8 << 20  # edit_file: larger files are refused (an edit rewrites the whole file)
SEARCH_MAX_BYTES = 32 << 20  # search: bytes of files searched in one call
SEARCH_TIMEOUT_S = 10.0  # search: wall time of the matching (a worker process, killed after)
MAX_TOOL_CALLS = 5_000  # tool calls one run may make; later ones are refused and counted
SEARCH_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_worker.py")
SANDBOX_WORKSPACE = "/workspace"  # where run_command's sandbox shows the workspace (claimgrid/sandbox/guard.py)

CATEGORIES = {
    "list_dir": "read",
    "read_file": "read",
    "search": "read",
    "edit_file": "edit",
    "write_file": "write",
    "run_command": "bash",
}


@dataclass
class ToolOutcome:
    """What one tool implementation returns: the text the model sees, whether the call
    did its job, why not, and tool-specific event fields (run_command: exit_code, timed_out)."""

    text: str
    ok: bool = True
    error: str | None = None
    fields: dict = field(default_factory=dict)


class HarnessTool:
    """One tool as the framework sees it: name, description, JSON schema, callable.

    Calling it validates the arguments against ``parameters``, runs the tool,
    measures the workspace change and emits exactly one event; it returns the text
    the model sees, ``"ERROR: ..."`` on any failure, and never raises.
    """

    def __init__(self, name: str, description: str, parameters: dict, impl, ctx: ToolContext):
        self.name = name
        self.description = description
        self.parameters = parameters
        self.category = CATEGORIES[name]
        self._impl = impl
        self._ctx = ctx

    def __repr__(self):
        return f"HarnessTool({self.name!r})"

    def __call__(self, **kwargs) -> str:
        return self._ctx.execute(self, kwargs)


class ToolContext:
    """State shared by one run's tools: workspace jail, command sandbox, budgets, channel."""

    def __init__(self, ctl: dict, channel: ToolChannel):
        self.ctl = ctl
        self.channel = channel
        spec = ctl.get("command_sandbox")
        self.ws = Jail(ctl["workspace"], aliases=(SANDBOX_WORKSPACE,) if spec else ())
        budgets = ctl.get("budgets") or {}
        self.max_output_chars = int(budgets.get("max_output_chars", 16000))
        self.read_max_bytes = int(budgets.get("read_max_bytes", READ_MAX_BYTES))
        self.edit_max_bytes = int(budgets.get("edit_max_bytes", EDIT_MAX_BYTES))
        self.search_max_bytes = int(budgets.get("search_max_bytes", SEARCH_MAX_BYTES))
        self.search_timeout_s = float(budgets.get("search_timeout_s", SEARCH_TIMEOUT_S))
        self.max_tool_calls = int(budgets.get("max_tool_calls", MAX_TOOL_CALLS))
        self.calls = 0
        self.commands = CommandSandbox(
            spec,
            self.ws.root,
            ctl.get("sandbox"),
            float(budgets.get("command_timeout_s", 30)),
            int(budgets.get("command_output_bytes", OUTPUT_KEEP_BYTES)),
        )
        self.faults = ToolFaultHook(ctl.get("tool_fault"))  # a probe's tool fault (tool_faults.py)

    def execute(self, tool: HarnessTool | None, args, name: str | None = None) -> str:
        name = tool.name if tool else name
        category = tool.category if tool else CATEGORIES.get(name, "unknown")
        self.calls += 1
        if self.calls > self.max_tool_calls:
            return self._refuse_over_cap(name)
        t0 = self.channel.now()
        # CPU the harness spends on this call (this thread + the commands it waited for): the
        # throughput bench subtracts it from the run's CPU to get the framework's own share.
        cpu0 = _cpu_now()
        cut: list = []
        before = self._snap(cut)
        fault = None
        try:
            if tool is None:
                raise ToolRefused(f"unknown tool '{name}'")
            checked = check_args(tool.parameters, args)
            fault = self.faults.take(category)
            if ToolFaultHook.skips_tool(fault):
                outcome = _failed(fault, name)
            else:
                outcome = tool._impl(self, **checked)
                if fault == ToolFaultKind.CHANGED_THEN_FAILED:
                    outcome = _failed(fault, name)
        except ToolRefused as exc:
            outcome = ToolOutcome(f"ERROR: {exc}", False, str(exc))
        except Exception as exc:  # a tool must never raise into the framework
            outcome = ToolOutcome(f"ERROR: {type(exc).__name__}: {exc}", False, f"{type(exc).__name__}: {exc}")
        after = self._snap(cut)
        changed = diff_snapshots(before, after) if before is not None and after is not None else None
        result = _truncate(outcome.text, self.max_output_chars)
        if cut:
            # Folders too deep to enter (or entries past the cap) were not fingerprinted:
            # the change record is what the walk saw, and says so.
            outcome.fields["snapshot_cut"] = sorted(set(cut))[:20]
        self.channel.emit(
            {
                "t": t0,
                "tool": name,
                "category": category,
                "args": _jsonable(args),
                "ok": outcome.ok,
                "error": outcome.error,
                "result": _truncate(result, RESULT_EVENT_CHARS),
                "result_chars": len(result),
                "changed_workspace": bool(changed) if changed is not None else None,
                "changed_paths": changed if changed is not None else [],
                "harness_cpu_s": round(_cpu_now() - cpu0, 4),
                **outcome.fields,
                **(
                    {
                        "fault": fault,
                        "delivered_chars": len(ToolFaultHook.delivered(fault, result)),
                        **self.faults.event_fields(fault),
                    }
                    if fault
                    else {}
                ),
            }
        )
        self.faults.hold(fault)  # a late result: recorded first, returned after its delay
        return ToolFaultHook.delivered(fault, result)

    def _snap(self, cut: list | None = None):
        try:
            return self.ws.snapshot(cut)
        except (OSError, RecursionError, ValueError):
            return None  # unknown, never guessed

    def _refuse_over_cap(self, name) -> str:
        """A call past ``max_tool_calls``: not run. The first one is an event; the rest are
        counted (``ToolChannel.refused``, sent as one ``limit`` event when the channel closes)."""
        text = f"ERROR: this run reached its cap of {self.max_tool_calls} tool calls; the call was not run"
        if self.channel.refused == 0:
            self.channel.emit(
                {
                    "t": self.channel.now(),
                    "tool": name,
                    "category": CATEGORIES.get(name, "unknown"),
                    "args": None,
                    "ok": False,
                    "error": text[7:],
                    "result": text,
                    "result_chars": len(text),
                    "changed_workspace": False,
                    "changed_paths": [],
                    "cap": "max_tool_calls",
                }
            )
        self.channel.refused += 1
        return text


def _failed(fault: str, name: str) -> ToolOutcome:
    text, error, fields = ToolFaultHook.failed(fault, name)
    return ToolOutcome(text, False, error, fields)


def _cpu_now() -> float:
    """This thread's CPU time plus the CPU of every child process reaped so far."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + ch.ru_utime + ch.ru_stime


def check_args(schema: dict, args) -> dict:
    if not isinstance(args, dict):
        raise ToolRefused("arguments must be an object")
    props = schema.get("properties", {})
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolRefused(f"unknown argument(s): {', '.join(unknown)}")
    missing = [k for k in schema.get("required", []) if k not in args]
    if missing:
        raise ToolRefused(f"missing required argument(s): {', '.join(missing)}")
    for key, value in args.items():
        if props[key].get("type") == "string" and not isinstance(value, str):
            raise ToolRefused(f"argument '{key}' must be a string")
    return dict(args)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    # Head and tail: a command's exit code and a flood's end are at the end.
    half = limit // 2
    return text[:half] + f"\n[... truncated: {len(text) - 2 * half} characters in the middle]\n" + text[-half:]


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------- implementations


def _list_dir(ctx: ToolContext, path: str = ".") -> ToolOutcome:
    if ctx.ws.kind(path) != "dir":
        raise ToolRefused(f"'{path}' is not a directory")
    with ctx.ws.folder(path) as (fd, _):
        names = []
        for name in sorted(os.listdir(fd)):
            try:
                is_dir = stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            except OSError:
                is_dir = False
            names.append(name + "/" if is_dir else name)
    return ToolOutcome("\n".join(names) if names else "(empty directory)")


def _read_file(ctx: ToolContext, path: str) -> ToolOutcome:
    data, _, size = ctx.ws.read_head(path, ctx.read_max_bytes)
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n[... file is {size} bytes; the harness read the first {len(data)}]"
        return ToolOutcome(text, fields={"read_cut": True, "file_bytes": size})
    return ToolOutcome(text)


def _search(ctx: ToolContext, pattern: str, path: str = ".") -> ToolOutcome:
    if _unencodable(pattern):
        raise ToolRefused("the pattern holds a lone surrogate, which no file can contain")
    kind = ctx.ws.kind(path)
    if kind == "file":
        data, rel, size = ctx.ws.read_head(path, SEARCH_MAX_FILE)
        files = [(rel, data)] if size <= SEARCH_MAX_FILE else []
    elif kind == "dir":
        files = _text_files(ctx, path)
    else:
        raise ToolRefused(f"'{path}' does not exist")
    texts, budget = [], ctx.search_max_bytes
    for rel, data in files:
        if b"\x00" in data[:8192]:
            continue
        if len(data) > budget:
            break
        budget -= len(data)
        texts.append((rel, data.decode("utf-8", errors="replace")))
    # The matching runs in a worker process killed at the time cap: a pattern that
    # backtracks catastrophically costs at most that, whatever the regex engine does.
    job = json.dumps({"pattern": pattern, "files": texts, "max_hits": SEARCH_MAX_HITS}, ensure_ascii=True)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", SEARCH_WORKER],
            input=job.encode(),
            capture_output=True,
            timeout=ctx.search_timeout_s,
            close_fds=True,
        )
    except subprocess.TimeoutExpired:
        t = ctx.search_timeout_s
        return ToolOutcome(
            f"ERROR: search stopped after {t:g}s (the harness's time cap); try a simpler pattern",
            False,
            f"search over its {t:g}s time cap",
            {"search_timed_out": True},
        )
    try:
        hits = json.loads(done.stdout)["hits"]
    except (ValueError, KeyError, TypeError):
        raise ToolRefused(f"search failed: {done.stderr.decode(errors='replace').strip()[-300:]}") from None
    if len(hits) > SEARCH_MAX_HITS:
        hits = hits[:SEARCH_MAX_HITS] + [f"[stopped after {SEARCH_MAX_HITS} matches]"]
    return ToolOutcome("\n".join(hits) if hits else "(no matches)")


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8", errors="surrogateescape")
        return False
    except UnicodeEncodeError:
        return True


def _text_files(ctx: ToolContext, path: str):
    """(rel, bytes) of the regular files under ``path``, read through descriptors."""
    for rel, dir_fd, name, st in ctx.ws.walk_files(path):
        if not stat.S_ISREG(st.st_mode) or st.st_size > SEARCH_MAX_FILE:
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as fh:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                yield rel, fh.read(SEARCH_MAX_FILE)


def _write_file(ctx: ToolContext, path: str, content: str) -> ToolOutcome:
    if _unencodable(content):
        raise ToolRefused("the content holds a lone surrogate, which has no UTF-8 form; nothing was written")
    rel = ctx.ws.write_bytes(path, content.encode("utf-8", errors="surrogateescape"))
    return ToolOutcome(f"wrote {len(content)} characters to {rel}")


def _edit_file(ctx: ToolContext, path: str, old: str, new: str) -> ToolOutcome:
    if old == "":
        raise ToolRefused("'old' must not be empty")
    if _unencodable(new):
        raise ToolRefused("'new' holds a lone surrogate, which has no UTF-8 form; nothing was written")
    data, rel, size = ctx.ws.read_head(path, ctx.edit_max_bytes + 1)
    if size > ctx.edit_max_bytes:
        raise ToolRefused(f"'{path}' is {size} bytes, over the {ctx.edit_max_bytes} an edit may rewrite")
    text = data.decode("utf-8", errors="surrogateescape")
    count = text.count(old)
    if count == 0:
        raise ToolRefused(f"'old' text not found in {path}")
    if count > 1:
        raise ToolRefused(f"'old' text occurs {count} times in {path}; give a unique snippet")
    ctx.ws.write_bytes(path, text.replace(old, new, 1).encode("utf-8", errors="surrogateescape"), must_exist=True)
    return ToolOutcome(f"edited {rel}: replaced 1 occurrence")


def _run_command(ctx: ToolContext, command: str) -> ToolOutcome:
    if _unencodable(command):
        raise ToolRefused("the command holds a lone surrogate, which has no byte form; it was not run")
    try:
        res = ctx.commands.run(command)
    except OSError as exc:
        raise ToolRefused(f"could not start the command: {exc}") from None
    # What the command printed in all, and whether the middle was cut (head and tail kept).
    output = {"output_bytes": res.output_bytes, **({"output_cut": True} if res.output_cut else {})}
    if res.timed_out:
        t = ctx.commands.timeout_s
        return ToolOutcome(
            res.output + f"\n[timed out after {t:g}s; every process it started was killed]",
            False,
            f"timed out after {t:g}s",
            {"exit_code": None, "timed_out": True, **output},
        )
    # A non-zero exit is still an executed command (ok); the exit code is evidence.
    return ToolOutcome(
        res.output + f"\n[exit code {res.exit_code}]",
        True,
        None,
        {"exit_code": res.exit_code, "timed_out": False, **output},
    )


SPECS = {
    "list_dir": (
        _list_dir,
        "List the entries of a directory in the workspace (directories end with '/').",
        {"path": ("string", "Directory relative to the workspace root; default '.'")},
        [],
    ),
    "read_file": (
        _read_file,
        "Read a text file in the workspace.",
        {"path": ("string", "File path relative to the workspace root")},
        ["path"],
    ),
    "search": (
        _search,
        "Search text files for a regular expression (or plain substring); returns 'path:line: text' lines.",
        {
            "pattern": ("string", "Regular expression or substring"),
            "path": ("string", "File or directory to search; default '.'"),
        },
        ["pattern"],
    ),
    "write_file": (
        _write_file,
        "Create or overwrite a file in the workspace (parent directories are created).",
        {"path": ("string", "File path relative to the workspace root"), "content": ("string", "The full new content")},
        ["path", "content"],
    ),
    "edit_file": (
        _edit_file,
        "Replace one exact, unique occurrence of 'old' with 'new' in a file.",
        {
            "path": ("string", "File path relative to the workspace root"),
            "old": ("string", "Exact text to replace; must occur exactly once"),
            "new": ("string", "Replacement text"),
        },
        ["path", "old", "new"],
    ),
    "run_command": (
        _run_command,
        "Run a shell command (bash -c) in the workspace root; returns its output and exit code.",
        {"command": ("string", "The shell command")},
        ["command"],
    ),
}


def _schema(props: dict, required: list) -> dict:
    return {
        "type": "object",
        "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
        "required": list(required),
        "additionalProperties": False,
    }


def make_tools(ctl: dict, channel: ToolChannel) -> list[HarnessTool]:
    """The tools named in ``ctl["tools"]`` (all six when absent), sharing one context."""
    ctx = ToolContext(ctl, channel)
    names = ctl.get("tools") or list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise ValueError(f"control names unknown tool(s): {', '.join(unknown)}")
    tools = []
    for name in names:
        impl, desc, props, required = SPECS[name]
        tools.append(HarnessTool(name, desc, _schema(props, required), impl, ctx))
    return tools


def call_tool(tools: list[HarnessTool], name: str, args) -> str:
    """Dispatch a call by name; an unknown name is still recorded (ok=false) and answered.

    For adapters whose framework lets them intercept calls to tools it does not know.
    """
    for tool in tools:
        if tool.name == name:
            if not isinstance(args, dict):
                return tool._ctx.execute(tool, args)
            return tool(**args)
    if not tools:
        return f"ERROR: unknown tool '{name}'"
    return tools[0]._ctx.execute(None, args, name=name)
