"""The harness tool layer: six workspace tools every adapter exposes to its framework.

Stdlib only; runs inside each framework's venv (Python 3.11).

Contract (docs/CONTRACTS.md, source ``tools``):

* ``make_tools(ctl, channel)`` returns ``HarnessTool`` objects for the names in
  ``ctl["tools"]``. Each has ``.name``, ``.description``, ``.parameters`` (JSON schema),
  ``.category`` and ``__call__(**kwargs) -> str``.
* A tool never raises into the framework. Refused paths, bad arguments and failures
  come back as an ``"ERROR: ..."`` string, and the event says ``ok: false``.
* Every call, refused or not, is one ``source: tools`` event sent on ``channel``;
  ``changed_workspace`` / ``changed_paths`` come from a snapshot of the workspace
  before and after the call, never from the tool's name.
* ``run_command`` runs ``bash -c`` in the workspace with a scrubbed environment, no
  inherited descriptors, its own process group (killed whole on timeout) and, when
  the harness runs as root, as user ``nobody`` so it cannot read the adapter's
  memory, descriptors or files in the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import threading
import time

RESULT_EVENT_CHARS = 16000
SNAPSHOT_HASH_MAX = 1 << 20  # files up to 1 MiB are hashed; larger ones by size+mtime
SNAPSHOT_SKIP = {".git", "__pycache__"}
SEARCH_MAX_HITS = 200
SEARCH_MAX_FILE = 2 << 20
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

CATEGORIES = {
    "list_dir": "read",
    "read_file": "read",
    "search": "read",
    "edit_file": "edit",
    "write_file": "write",
    "run_command": "bash",
}


class ToolRefused(Exception):
    """A call the tool layer declines (bad path, bad argument); becomes ok=false."""


# ---------------------------------------------------------------- tools channel


class ToolChannel:
    """Writes ``source: tools`` events as JSON lines to an inherited pipe descriptor.

    The descriptor is made non-inheritable at once, so no ``run_command`` child ever
    holds it. Writes are serialised (frameworks may run tools on several threads) and
    looped until complete, because one line may exceed the pipe's atomic size.
    """

    def __init__(self, fd: int | None, start: float | None = None):
        self.fd = fd
        if fd is not None:
            os.set_inheritable(fd, False)
        self.start = time.monotonic() if start is None else start
        self._lock = threading.Lock()
        self._seq = 0
        self.events: list[dict] = []  # kept too, for tests and for the outcome's tail

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def emit(self, event: dict) -> dict:
        with self._lock:
            event = {"source": "tools", "kind": "tool_call", "seq": self._seq, **event}
            self._seq += 1
            self.events.append(event)
            if self.fd is not None:
                data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
                try:
                    while data:
                        n = os.write(self.fd, data)
                        data = data[n:]
                except OSError:
                    # The driver stopped listening (killed run); the event stays local.
                    self.fd = None
            return event

    def close(self) -> None:
        with self._lock:
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None


# ---------------------------------------------------------------- workspace


def snapshot(root: str) -> dict:
    """path -> fingerprint for the workspace, excluding .git and __pycache__.

    Files: (size, mtime_ns, mode, sha256 if small); symlinks: their target;
    directories: presence only (their mtime moves when ignored caches appear).
    """
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SNAPSHOT_SKIP)
        rel_dir = os.path.relpath(dirpath, root)
        for name in dirnames:  # os.walk does not descend into symlinked directories
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            out[rel] = ("l", _readlink(full)) if os.path.islink(full) else ("d",)
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", _readlink(full))
                continue
            digest = None
            if stat.S_ISREG(st.st_mode) and st.st_size <= SNAPSHOT_HASH_MAX:
                try:
                    with open(full, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                except OSError:
                    digest = "unreadable"
            out[rel] = ("f", st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode), digest)
    return out


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def diff_snapshots(before: dict, after: dict) -> list[str]:
    changed = [p for p in after if before.get(p) != after[p]]
    changed += [p for p in before if p not in after]
    return sorted(changed)


class Workspace:
    """Resolves agent-given paths; anything that lands outside the workspace is refused."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)

    def resolve(self, path) -> str:
        if not isinstance(path, str) or path == "":
            raise ToolRefused("path must be a non-empty string")
        if "\x00" in path:
            raise ToolRefused("path contains a NUL byte")
        joined = path if os.path.isabs(path) else os.path.join(self.root, path)
        real = os.path.realpath(joined)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise ToolRefused(f"path '{path}' is outside the workspace")
        return real

    def rel(self, real: str) -> str:
        return os.path.relpath(real, self.root)


# ---------------------------------------------------------------- tool objects


class HarnessTool:
    """One tool as the framework sees it: name, description, JSON schema, callable.

    Calling it validates the arguments against ``parameters``, runs the tool,
    measures the workspace change and emits exactly one event; it returns the text
    the model sees, ``"ERROR: ..."`` on any failure, and never raises.
    """

    def __init__(self, name: str, description: str, parameters: dict, impl, ctx: "ToolContext"):
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
    """State shared by one run's tools: workspace, budgets, channel, sandbox user."""

    def __init__(self, ctl: dict, channel: ToolChannel):
        self.ctl = ctl
        self.channel = channel
        self.ws = Workspace(ctl["workspace"])
        budgets = ctl.get("budgets") or {}
        self.command_timeout_s = float(budgets.get("command_timeout_s", 30))
        self.max_output_chars = int(budgets.get("max_output_chars", 16000))
        self.sandbox = ctl.get("sandbox")
        self._cmd_home = None

    # -- bookkeeping

    def execute(self, tool: HarnessTool | None, args, name: str | None = None) -> str:
        name = tool.name if tool else name
        category = tool.category if tool else CATEGORIES.get(name, "unknown")
        t0 = self.channel.now()
        before = self._snap()
        extra = {}
        try:
            if tool is None:
                raise ToolRefused(f"unknown tool '{name}'")
            kwargs = _check_args(tool.parameters, args)
            result = tool._impl(self, **kwargs)
            if isinstance(result, tuple):  # run_command: (text, extra fields, ok, error)
                result, extra, ok, error = result
            else:
                ok, error = True, None
        except ToolRefused as exc:
            ok, error, result = False, str(exc), f"ERROR: {exc}"
        except Exception as exc:  # a tool must never raise into the framework
            ok, error, result = False, f"{type(exc).__name__}: {exc}", f"ERROR: {type(exc).__name__}: {exc}"
        after = self._snap()
        changed = diff_snapshots(before, after) if before is not None and after is not None else None
        result = _truncate(result, self.max_output_chars)
        self.channel.emit({
            "t": t0, "tool": name, "category": category, "args": _jsonable(args),
            "ok": ok, "error": error, "result": result[:RESULT_EVENT_CHARS],
            "result_chars": len(result),
            "changed_workspace": bool(changed) if changed is not None else None,
            "changed_paths": changed if changed is not None else [],
            **extra,
        })
        return result

    def _snap(self):
        try:
            return snapshot(self.ws.root)
        except OSError:
            return None  # unknown, never guessed

    # -- sandbox user for run_command

    def command_home(self) -> str:
        """A HOME for commands that the command's user cannot write (root-owned, 0555)."""
        if self._cmd_home is None:
            base = self.sandbox or self.ws.root + ".sandbox"
            home = os.path.join(base, "cmdhome")
            bindir = os.path.join(home, "bin")
            os.makedirs(bindir, exist_ok=True)
            py = shutil.which("python3", path=SAFE_PATH)
            link = os.path.join(bindir, "python")
            if py and not os.path.lexists(link):
                os.symlink(py, link)
            os.chmod(bindir, 0o555)
            os.chmod(home, 0o555)
            if self.sandbox:
                # Traversable so nobody reaches cmdhome, but not listable or writable.
                os.chmod(self.sandbox, 0o711)
            self._cmd_home = home
        return self._cmd_home


def _check_args(schema: dict, args) -> dict:
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
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters]"


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------- implementations


def _list_dir(ctx: ToolContext, path: str = ".") -> str:
    real = ctx.ws.resolve(path)
    if not os.path.isdir(real):
        raise ToolRefused(f"'{path}' is not a directory")
    names = []
    for name in sorted(os.listdir(real)):
        full = os.path.join(real, name)
        names.append(name + "/" if os.path.isdir(full) and not os.path.islink(full) else name)
    return "\n".join(names) if names else "(empty directory)"


def _read_file(ctx: ToolContext, path: str) -> str:
    real = ctx.ws.resolve(path)
    if not os.path.isfile(real):
        raise ToolRefused(f"'{path}' is not a file")
    with open(real, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def _search(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    real = ctx.ws.resolve(path)
    try:
        rx = re.compile(pattern)
        match = rx.search
    except re.error:
        match = lambda line: pattern in line  # noqa: E731 - substring fallback
    files = []
    if os.path.isfile(real):
        files = [real]
    elif os.path.isdir(real):
        for dirpath, dirnames, filenames in os.walk(real):
            dirnames[:] = sorted(d for d in dirnames if d not in SNAPSHOT_SKIP)
            files += [os.path.join(dirpath, f) for f in sorted(filenames)]
    else:
        raise ToolRefused(f"'{path}' does not exist")
    hits = []
    for full in files:
        if len(hits) >= SEARCH_MAX_HITS:
            break
        if os.path.islink(full) or not _is_text(full):
            continue
        with open(full, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
        for no, line in enumerate(text.splitlines(), 1):
            if match(line):
                hits.append(f"{ctx.ws.rel(full)}:{no}: {line}")
                if len(hits) >= SEARCH_MAX_HITS:
                    hits.append(f"[stopped after {SEARCH_MAX_HITS} matches]")
                    break
    return "\n".join(hits) if hits else "(no matches)"


def _is_text(path: str) -> bool:
    try:
        if os.path.getsize(path) > SEARCH_MAX_FILE:
            return False
        with open(path, "rb") as fh:
            return b"\x00" not in fh.read(8192)
    except OSError:
        return False


def _make_shareable(path: str, mode: int) -> None:
    # When the harness runs as root, run_command runs as nobody: files the tools
    # create must stay editable by the agent's own commands.
    if os.geteuid() == 0:
        os.chmod(path, mode)


def _write_file(ctx: ToolContext, path: str, content: str) -> str:
    real = ctx.ws.resolve(path)
    if os.path.isdir(real):
        raise ToolRefused(f"'{path}' is a directory")
    parent = os.path.dirname(real)
    missing = []
    p = parent
    while not os.path.exists(p):
        missing.append(p)
        p = os.path.dirname(p)
    os.makedirs(parent, exist_ok=True)
    for d in missing:
        _make_shareable(d, 0o777)
    with open(real, "w", encoding="utf-8") as fh:
        fh.write(content)
    _make_shareable(real, 0o666)
    return f"wrote {len(content)} characters to {ctx.ws.rel(real)}"


def _edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    real = ctx.ws.resolve(path)
    if not os.path.isfile(real):
        raise ToolRefused(f"'{path}' is not a file")
    if old == "":
        raise ToolRefused("'old' must not be empty")
    with open(real, encoding="utf-8", errors="surrogateescape") as fh:
        text = fh.read()
    count = text.count(old)
    if count == 0:
        raise ToolRefused(f"'old' text not found in {path}")
    if count > 1:
        raise ToolRefused(f"'old' text occurs {count} times in {path}; give a unique snippet")
    with open(real, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text.replace(old, new, 1))
    return f"edited {ctx.ws.rel(real)}: replaced 1 occurrence"


def _sandbox_user() -> dict:
    """Popen keyword arguments that drop root to ``nobody``; empty when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("nobody")
        uid, gid = pw.pw_uid, pw.pw_gid
    except KeyError:
        uid = gid = 65534
    return {"user": uid, "group": gid, "extra_groups": []}


def _run_command(ctx: ToolContext, command: str):
    home = ctx.command_home()
    env = {"PATH": os.path.join(home, "bin") + ":" + SAFE_PATH, "LANG": "C.UTF-8", "HOME": home}
    try:
        proc = subprocess.Popen(
            ["bash", "-c", command], cwd=ctx.ws.root, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            close_fds=True, process_group=0, **_sandbox_user(),
        )
    except OSError as exc:
        raise ToolRefused(f"could not start the command: {exc}") from None
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=ctx.command_timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        try:
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out = b""  # a grandchild escaped the group and holds the pipe open
    text = out.decode("utf-8", errors="replace")
    if timed_out:
        text += f"\n[timed out after {ctx.command_timeout_s:g}s; process group killed]"
        return text, {"exit_code": None, "timed_out": True}, False, f"timed out after {ctx.command_timeout_s:g}s"
    # A non-zero exit is still an executed command (ok); the exit code is evidence.
    text += f"\n[exit code {proc.returncode}]"
    return text, {"exit_code": proc.returncode, "timed_out": False}, True, None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


_SPECS = {
    "list_dir": (_list_dir, "List the entries of a directory in the workspace (directories end with '/').",
                 {"path": ("string", "Directory relative to the workspace root; default '.'")}, []),
    "read_file": (_read_file, "Read a text file in the workspace.",
                  {"path": ("string", "File path relative to the workspace root")}, ["path"]),
    "search": (_search, "Search text files for a regular expression (or plain substring); "
                        "returns 'path:line: text' lines.",
               {"pattern": ("string", "Regular expression or substring"),
                "path": ("string", "File or directory to search; default '.'")}, ["pattern"]),
    "write_file": (_write_file, "Create or overwrite a file in the workspace (parent directories are created).",
                   {"path": ("string", "File path relative to the workspace root"),
                    "content": ("string", "The full new content")}, ["path", "content"]),
    "edit_file": (_edit_file, "Replace one exact, unique occurrence of 'old' with 'new' in a file.",
                  {"path": ("string", "File path relative to the workspace root"),
                   "old": ("string", "Exact text to replace; must occur exactly once"),
                   "new": ("string", "Replacement text")}, ["path", "old", "new"]),
    "run_command": (_run_command, "Run a shell command (bash -c) in the workspace root; returns its output and exit code.",
                    {"command": ("string", "The shell command")}, ["command"]),
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
    names = ctl.get("tools") or list(_SPECS)
    unknown = [n for n in names if n not in _SPECS]
    if unknown:
        raise ValueError(f"control names unknown tool(s): {', '.join(unknown)}")
    tools = []
    for name in names:
        impl, desc, props, required = _SPECS[name]
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
