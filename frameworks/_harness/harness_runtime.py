"""Shared run logic for fresh and forked adapter processes (stdlib only).

``run_one(ctl, adapter, tools_fd, mode)`` is the whole life of one run inside the
adapter process: harden the process, build the tools and the recorder, call
``adapter.run``, and write the outcome JSON atomically to ``ctl["outcome_path"]``.
Fresh mode (run_adapter.py) and warm mode (warm_parent.py's forked child) both call
it, so the two modes differ only in how the interpreter got its imports.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import sys
import threading
import time
import traceback

import reaper  # frameworks/_harness/reaper.py
from harness_shared.harness_control import ControlError, check_control
from harness_tools import ToolChannel, make_tools

HARNESS_VERSION = "1"
TRACEBACK_TAIL = 4000
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


class RuntimeRecorder:
    """Collects ``source: runtime`` events from the adapter; each gets ``t`` (s since start).

    Thread-safe: frameworks call hooks from worker threads.
    """

    def __init__(self, start: float | None = None):
        self.start = time.monotonic() if start is None else start
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def event(self, kind: str, **fields) -> dict:
        ev = {"source": "runtime", "kind": kind, **fields, "t": round(time.monotonic() - self.start, 4)}
        with self._lock:
            self.events.append(ev)
        return ev

    def tool_call(self, agent, tool, args) -> dict:
        return self.event("tool_call", agent=agent, tool=tool, args=args)

    def model_call(self, agent, model, usage=None) -> dict:
        return self.event("model_call", agent=agent, model=model, usage=usage)

    def message(self, agent, role, text) -> dict:
        return self.event("message", agent=agent, role=role, text=text)

    def error(self, agent, type, message) -> dict:  # noqa: A002 - contract name
        return self.event("error", agent=agent, type=type, message=message)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [_jsonable(e) for e in self.events]


def _jsonable(obj):
    try:
        json.dumps(obj)
        return obj
    except (TypeError, ValueError):
        return json.loads(json.dumps(obj, default=repr))


def harden_process() -> None:
    """Make this process's /proc entries (fd, environ, mem) unreadable to other users'
    and same-user processes, and adopt orphaned descendants so a kill finds them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # non-Linux: run_command's user separation still applies


def limit_open_files(limit) -> None:
    """This process's RLIMIT_NOFILE, soft and hard, at most ``limit`` (claimgrid caps
    ADAPTER_MAX_OPEN_FILES): an agent cannot open more, nor raise it back unprivileged."""
    import resource

    if not isinstance(limit, int) or limit <= 0:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = min(limit, hard) if hard != resource.RLIM_INFINITY else limit
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, new), new))
    except (ValueError, OSError):
        pass


def environ_changes(before: dict, after: dict) -> dict:
    """What changed in the environment between ``before`` and ``after``: ``{name: value}``,
    value None for a variable that was removed."""
    changes = {k: v for k, v in after.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in after})
    return changes


def reset_environ(env: dict, changes: dict | None = None) -> None:
    """Make ``os.environ`` the launcher's ``env`` plus ``changes`` (``environ_changes``).

    A warm child gets the launcher's environment for its run and the changes its parent's
    adapter import and ``preload()`` made to the parent's: the environment a fresh process
    has after the same import and ``preload()`` (tests/test_launch_parity.py)."""
    os.environ.clear()
    os.environ.update(env)
    for name, value in (changes or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def load_adapter(adapter_dir: str):
    """Import ``<adapter_dir>/adapter.py`` as module ``adapter``."""
    adapter_dir = os.path.abspath(adapter_dir)
    if adapter_dir not in sys.path:
        sys.path.insert(0, adapter_dir)
    path = os.path.join(adapter_dir, "adapter.py")
    spec = importlib.util.spec_from_file_location("adapter", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no adapter.py in {adapter_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["adapter"] = module
    spec.loader.exec_module(module)
    return module


def error_info(exc: BaseException) -> dict:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"type": type(exc).__name__, "message": str(exc)[:4000], "traceback_tail": tb[-TRACEBACK_TAIL:]}


def write_outcome(path: str, outcome: dict) -> None:
    """Write atomically (tmp + rename): the driver sees the whole outcome or none."""
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # ASCII JSON: a lone surrogate (a model's "\ud800", a non-UTF-8 file name) is written as
    # its escape, which the driver reads back as the same string; UTF-8 output would raise.
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(outcome, fh, ensure_ascii=True, default=repr)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run_one(ctl: dict, adapter, tools_fd: int | None, mode: str, adapter_error: BaseException | None = None) -> int:
    """Run one control object through ``adapter``; always tries to write the outcome.

    An exception from the adapter (or from importing it: ``adapter_error``) is an
    outcome with ``error`` and ``final_text: null``; the return value (exit code) is
    0 then. Only a harness failure (cannot write the outcome) returns non-zero.
    """
    start = time.monotonic()
    harden_process()
    try:
        check_control(ctl)  # the declared shape (harness_control.Control), as the driver checked it
    except ControlError as exc:
        print(f"harness: bad control: {exc}", file=sys.stderr)
        return 2
    limit_open_files((ctl.get("budgets") or {}).get("max_open_files"))
    channel = ToolChannel(tools_fd, start)
    rec = RuntimeRecorder(start)
    versions, final_text, error = {}, None, None
    if adapter_error is not None:
        error = error_info(adapter_error)
    else:
        try:
            versions = adapter.versions()
        except Exception as exc:  # the run still happens; the missing facts are stated
            versions = {"versions_error": f"{type(exc).__name__}: {exc}"}
        try:
            tools = make_tools(ctl, channel)
            result = adapter.run(ctl, tools, rec)
            if result is not None and not isinstance(result, str):
                raise TypeError(f"adapter.run returned {type(result).__name__}, not str or None")
            final_text = result
        except BaseException as exc:  # noqa: BLE001 - SystemExit from an adapter is an error too
            error = error_info(exc)
    # Before the outcome (which the driver reads back) and the verifier's read of the
    # workspace: every process the run started is gone (reaper.end_run), e.g. a command's
    # double-forked setsid child that the adapter, a subreaper, adopted.
    sandbox = ctl.get("agent_sandbox") or {}
    try:
        ended = reaper.end_run(
            sandbox.get("uid"), sandbox.get("cgroup_procs") or (), guarded=bool(sandbox or ctl.get("command_sandbox"))
        )
        rec.event("run_processes", **ended)
    except reaper.ProcessesLeft as exc:
        error, final_text = error_info(exc), None
    channel.close()
    outcome = {
        "schema": 1,
        "run_id": ctl.get("run_id"),
        "framework": getattr(adapter, "FRAMEWORK", None) or ctl.get("framework"),
        "versions": _jsonable(versions),
        "final_text": final_text,
        "events": rec.snapshot(),
        "error": error,
        "wall_s": round(time.monotonic() - start, 4),
        "harness": {
            "version": HARNESS_VERSION,
            "isolation": mode,
            "pid": os.getpid(),
            "tool_calls": len(channel.events),
        },
    }
    try:
        write_outcome(ctl["outcome_path"], outcome)
    except Exception as exc:
        print(f"harness: cannot write outcome: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    return 0
