"""Run one adapter process per run: fresh interpreter or forked from a warm parent.

The driver never imports framework code: it starts ``<venv python>`` on
``frameworks/_harness/run_adapter.py`` (fresh) or asks the framework's warm parent
(``warm_parent.py``, one per framework, started lazily, restarted if it died) to
fork a child. Either way the adapter process

* gets the control JSON over stdin / the warm parent's socket (never a file, never
  the environment: the run token stays in its memory),
* gets the write end of a tools pipe that the launcher drains concurrently,
* runs in its own session/process group with stdout/stderr going to
  ``<sandbox>/adapter.stdout`` / ``adapter.stderr``, in a clean environment,
* is killed with its whole tree at ``timeout_s``, and its leftovers are swept after it exits.

``Launcher.launch`` is thread-safe and never raises for anything the adapter does:
crash, hang, garbage output, garbage outcome are all a ``LaunchResult``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ROOT
from .launch_io import PipeReader, read_outcome, tail
from .launch_kill import kill_tree
from .venvs import Entry

HARNESS_DIR = ROOT / "frameworks" / "_harness"
RUN_ADAPTER = HARNESS_DIR / "run_adapter.py"
WARM_PARENT = HARNESS_DIR / "warm_parent.py"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
ISOLATIONS = ("warm", "fresh")

# Every switch we know that keeps a framework from phoning home or writing outside HOME.
TELEMETRY_OFF = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "ANONYMIZED_TELEMETRY": "false",
    "DO_NOT_TRACK": "1",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass
class LaunchResult:
    """What one adapter run left: outcome (valid or None), tool events, process event."""

    outcome: dict | None
    outcome_status: str               # ok | missing | unparseable | invalid
    tool_events: list[dict]
    process_event: dict               # CONTRACTS source "process"
    stdout_path: str = ""
    stderr_path: str = ""
    extra: dict = field(default_factory=dict)


def adapter_env(entry: Entry, home: str, python: str, sandbox: str | None = None) -> dict:
    """The adapter's whole environment: no inherited variables, no keys unless opted in."""
    env = {
        "PATH": f"{Path(python).parent}:{SAFE_PATH}",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{HARNESS_DIR}:{entry.adapter_dir}",
        "PYTHONUNBUFFERED": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "CREWAI_STORAGE_DIR": os.path.join(sandbox or home, "crewai"),
        **TELEMETRY_OFF,
    }
    for name in entry.pass_env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _prepare_sandbox(ctl: dict) -> tuple[str, str]:
    sandbox = ctl["sandbox"]
    home = os.path.join(sandbox, "home")
    os.makedirs(home, exist_ok=True)
    os.makedirs(os.path.join(sandbox, "crewai"), exist_ok=True)
    os.chmod(home, 0o700)
    # The agent's commands may run as another user: they may traverse the sandbox to
    # reach their HOME but not list or write it (outcome, logs, adapter HOME live here).
    os.chmod(sandbox, 0o711)
    try:
        os.unlink(ctl["outcome_path"])  # a stale outcome must never pass for this run's
    except FileNotFoundError:
        pass
    return sandbox, home


def _status_fields(exit_code: int | None) -> tuple[int | None, str | None]:
    """Popen-style code (negative = signal) -> (exit_code, signal name)."""
    if exit_code is None:
        return None, None
    if exit_code < 0:
        try:
            return None, signal.Signals(-exit_code).name
        except ValueError:
            return None, str(-exit_code)
    return exit_code, None


class _WarmParent:
    def __init__(self, proc: subprocess.Popen, folder: str, socket_path: str, log_path: str):
        self.proc, self.folder, self.socket_path, self.log_path = proc, folder, socket_path, log_path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                kill_tree(self.proc.pid)
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class WarmStartError(Exception):
    def __init__(self, message: str, log_tail: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.log_tail, self.exit_code = log_tail, exit_code


class Launcher:
    """Launches adapter runs for the frameworks in ``framework_entries``.

    ``python``: override the venv interpreter for every framework (tests use
    ``sys.executable`` with stdlib-only fake adapters). ``warm_start_timeout_s``:
    how long a warm parent may take to import its framework.
    """

    def __init__(self, framework_entries: dict[str, Entry], isolation: str = "warm",
                 python: str | None = None, warm_start_timeout_s: float = 180.0):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        self.entries = dict(framework_entries)
        self.isolation = isolation
        self.python_override = python
        self.warm_start_timeout_s = warm_start_timeout_s
        self._lock = threading.Lock()
        self._fw_locks = {name: threading.Lock() for name in self.entries}
        self._warm: dict[str, _WarmParent] = {}
        self._closed = False

    def python_for(self, entry: Entry) -> str:
        return self.python_override or str(entry.venv_python)

    # ------------------------------------------------------------------ public

    def launch(self, framework: str, ctl: dict, timeout_s: float) -> LaunchResult:
        """Run one control object to completion (or timeout); never raises for adapter faults."""
        entry = self.entries[framework]  # an unknown name is the caller's bug: KeyError
        sandbox, home = _prepare_sandbox(ctl)
        stdout_path = os.path.join(sandbox, "adapter.stdout")
        stderr_path = os.path.join(sandbox, "adapter.stderr")
        t0 = time.monotonic()
        r, w_fd = os.pipe()
        reader = PipeReader(r)
        w = _WriteEnd(w_fd)
        try:
            if self.isolation == "fresh":
                proc_info = self._run_fresh(entry, ctl, timeout_s, w, home, stdout_path, stderr_path)
            else:
                proc_info = self._run_warm(entry, ctl, timeout_s, w, home)
        finally:
            w.close()  # our copy must go, or the reader never sees EOF
        tool_events = reader.finish()
        wall_s = round(time.monotonic() - t0, 4)
        outcome, status, problem = read_outcome(ctl["outcome_path"], ctl)
        exit_code, sig = _status_fields(proc_info.get("returncode"))
        event = {
            "source": "process", "kind": "exit", "isolation": self.isolation,
            "exit_code": exit_code, "signal": sig, "wall_s": wall_s,
            "timed_out": proc_info.get("timed_out", False), "outcome_status": status,
            "stderr_tail": proc_info.get("stderr_tail") or tail(stderr_path),
            "pid": proc_info.get("pid"), "killed_processes": proc_info.get("killed", 0),
            "leftovers_killed": proc_info.get("leftovers", 0),
        }
        if problem:
            event["outcome_problem"] = problem
        if reader.garbage:
            event["tools_channel_garbage"] = reader.garbage
        if proc_info.get("launch_error"):
            event["launch_error"] = proc_info["launch_error"]
        return LaunchResult(outcome, status, tool_events, event, stdout_path, stderr_path)

    def close(self) -> None:
        """Stop every warm parent (their running children are killed with them)."""
        with self._lock:
            self._closed = True
            parents, self._warm = list(self._warm.values()), {}
        for wp in parents:
            wp.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ fresh

    def _run_fresh(self, entry, ctl, timeout_s, w, home, stdout_path, stderr_path) -> dict:
        python = self.python_for(entry)
        cmd = [python, str(RUN_ADAPTER), "--adapter-dir", str(entry.adapter_dir), "--tools-fd", str(w.fd)]
        env = adapter_env(entry, home, python, ctl["sandbox"])
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                                        cwd=home, pass_fds=(w.fd,), start_new_session=True)
            except OSError as exc:
                return {"returncode": None, "launch_error": f"{type(exc).__name__}: {exc}"}
        w.close()
        info = {"pid": proc.pid, "timed_out": False}
        try:
            proc.communicate(json.dumps(ctl).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            info["timed_out"] = True
            info["killed"] = kill_tree(proc.pid)
            proc.wait()
        except BrokenPipeError:
            proc.wait()  # died before reading its control; the exit status says how
        info["returncode"] = proc.returncode
        info["leftovers"] = kill_tree(proc.pid, include_root=False)
        return info

    # ------------------------------------------------------------------ warm

    def _warm_parent(self, entry: Entry) -> _WarmParent:
        with self._fw_locks[entry.name]:
            with self._lock:
                if self._closed:
                    raise WarmStartError("launcher is closed")
                wp = self._warm.get(entry.name)
            if wp is not None and wp.alive():
                return wp
            if wp is not None:
                wp.stop()  # died: start a new one
            wp = self._start_warm(entry)
            with self._lock:
                self._warm[entry.name] = wp
            return wp

    def _start_warm(self, entry: Entry) -> _WarmParent:
        folder = tempfile.mkdtemp(prefix=f"cg-warm-{entry.name}-")
        os.chmod(folder, 0o700)
        home = os.path.join(folder, "home")
        os.makedirs(home)
        socket_path = os.path.join(folder, "sock")
        log_path = os.path.join(folder, "warm.log")
        python = self.python_for(entry)
        cmd = [python, str(WARM_PARENT), "--adapter-dir", str(entry.adapter_dir), "--socket", socket_path]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=adapter_env(entry, home, python), cwd=home, start_new_session=True)
        wp = _WarmParent(proc, folder, socket_path, log_path)
        deadline = time.monotonic() + self.warm_start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log_tail = tail(log_path)
                shutil.rmtree(folder, ignore_errors=True)
                raise WarmStartError(f"warm parent for {entry.name} exited with {proc.returncode} during preload",
                                     log_tail, proc.returncode)
            if os.path.exists(socket_path):
                try:
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                        probe.connect(socket_path)
                    return wp
                except OSError:
                    pass
            time.sleep(0.02)
        log_tail = tail(log_path)
        wp.stop()
        raise WarmStartError(f"warm parent for {entry.name} not ready after {self.warm_start_timeout_s:g}s", log_tail)

    def _run_warm(self, entry, ctl, timeout_s, w, home) -> dict:
        t_end = time.monotonic() + timeout_s
        try:
            wp = self._warm_parent(entry)
        except WarmStartError as exc:
            return {"returncode": exc.exit_code, "launch_error": str(exc), "stderr_tail": exc.log_tail}
        python = self.python_for(entry)
        request = {"ctl": ctl, "env": adapter_env(entry, home, python, ctl["sandbox"]), "cwd": home}
        payload = (json.dumps(request) + "\n").encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        info: dict = {"timed_out": False, "returncode": None}
        try:
            sock.settimeout(30)
            sock.connect(wp.socket_path)
            sent = socket.send_fds(sock, [payload], [w.fd])
            sock.sendall(payload[sent:])
            w.close()  # only the child holds the write end now: its exit means EOF
            lines = _Lines(sock)
            first = lines.next(max(1.0, t_end - time.monotonic()))
            if first is None or "pid" not in first:
                info["launch_error"] = f"warm parent did not start the run: {first}"
                return info
            pid = info["pid"] = first["pid"]
            info["warm_parent_pid"] = wp.proc.pid
            remaining = t_end - time.monotonic()
            done = lines.next(remaining) if remaining > 0 else None
            if done is None and not lines.eof:
                info["timed_out"] = True
                info["killed"] = kill_tree(pid)
                done = lines.next(10.0)
            if done is not None and "status" in done:
                info["returncode"] = _from_wait_status(done["status"])
            else:
                info["launch_error"] = "warm parent closed the connection without the child's exit status"
                info["killed"] = info.get("killed", 0) + kill_tree(pid)
            info["leftovers"] = kill_tree(pid, include_root=False)
            return info
        except OSError as exc:
            info["launch_error"] = f"warm parent connection failed: {type(exc).__name__}: {exc}"
            if info.get("pid"):
                info["killed"] = kill_tree(info["pid"])
            return info
        finally:
            sock.close()


def _from_wait_status(status: int) -> int:
    try:
        return os.waitstatus_to_exitcode(status)
    except ValueError:
        return -1


class _Lines:
    """JSON lines from a socket, each wait bounded by a timeout."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf, self.eof = sock, b"", False

    def next(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                self.eof = True
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            obj = json.loads(line)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None


class _WriteEnd:
    """The tools pipe's write end, closed exactly once (fd numbers are reused across threads)."""

    def __init__(self, fd: int):
        self.fd: int | None = fd

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
