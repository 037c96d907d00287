"""The warm strategy: one warm parent per framework (imports it once), one forked child per run.

A warm parent is started lazily, in its own session, with the driver's pid on its
command line (it exits as soon as that pid is no longer its parent, preload included),
and registered with the watchdog so a driver killed with -9 takes it down too. A run
waits for the parent's readiness (its socket accepting) only up to the run's own
deadline: a preload that takes longer is that run's ``timeout``, and the parent keeps
preloading for the next run until ``warm_start_timeout_s``, after which it is killed and
the run that noticed it records a launch error.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from claimgrid.anybytes import remove_tree
from claimgrid.caps import UNIX_SOCKET_PATH_MAX
from claimgrid.launch.handles import ProcessRecord
from claimgrid.launch.kill import kill_tree
from claimgrid.launch.outcome import tail
from claimgrid.launch.pipe import WriteEnd


class WarmStartError(Exception):
    def __init__(self, message: str, log_tail: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.log_tail, self.exit_code = log_tail, exit_code


def _short_folder(name: str) -> str:
    """A new private folder for one warm parent whose ``sock`` path can be bound: under the
    temporary folder when the path fits in :data:`UNIX_SOCKET_PATH_MAX`, else under /tmp
    (the framework's name shortened, then left out, until it fits)."""
    for base, label in ((tempfile.gettempdir(), name), ("/tmp", name[:24]), ("/tmp", "")):
        # mkdtemp adds 8 characters; the socket is "<folder>/sock".
        if len(os.path.join(base, f"cg-warm-{label}-" + "x" * 8, "sock")) <= UNIX_SOCKET_PATH_MAX:
            return tempfile.mkdtemp(prefix=f"cg-warm-{label}-", dir=base)
    raise WarmStartError(f"no folder for the warm parent's socket fits {UNIX_SOCKET_PATH_MAX} bytes")


class WarmParent:
    """One started warm parent process: its folder (socket, log, HOME) and readiness."""

    def __init__(
        self, name: str, proc: subprocess.Popen, folder: str, socket_path: str, log_path: str, ready_by: float, watchdog
    ):
        self.name, self.proc, self.folder = name, proc, folder
        self.socket_path, self.log_path = socket_path, log_path
        self.ready_by, self.watchdog = ready_by, watchdog
        self.ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def poll_ready(self) -> bool:
        """One non-blocking look: True once the socket accepts a connection."""
        if not self.ready and os.path.exists(self.socket_path):
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.connect(self.socket_path)
                self.ready = True
            except OSError:
                pass
        return self.ready

    def wait_ready(self, t_end: float) -> bool:
        """True once the socket accepts; False when ``t_end`` (the run's deadline) comes
        first. Raises WarmStartError when the parent died or missed ``ready_by``."""
        while not self.ready:
            if self.proc.poll() is not None:
                raise WarmStartError(
                    f"warm parent for {self.name} exited with {self.proc.returncode} during preload",
                    tail(self.log_path),
                    self.proc.returncode,
                )
            if os.path.exists(self.socket_path):
                try:
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                        probe.connect(self.socket_path)
                    self.ready = True
                    break
                except OSError:
                    pass
            now = time.monotonic()
            if now >= self.ready_by:
                log_tail = tail(self.log_path)
                self.stop()
                raise WarmStartError(f"warm parent for {self.name} not ready after its start limit", log_tail)
            if now >= t_end:
                return False
            time.sleep(0.02)
        return True

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM (it kills its children and exits), SIGKILL of the tree after ``grace_s``."""
        if self.proc.poll() is None:
            if not self.ready:
                grace_s = 0  # still importing: no handler installed, nothing to wind down
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                kill_tree(self.proc.pid)
                self.proc.wait()
        kill_tree(self.proc.pid, include_root=False)  # children of a parent that went on its own
        remove_tree(self.folder)
        self.watchdog.forget_tree(self.proc.pid)
        self.watchdog.forget_dir(self.folder)


class WarmPool:
    """The warm parents of one launcher, by framework name (thread-safe)."""

    def __init__(self, names, watchdog, warm_start_timeout_s: float):
        self.watchdog = watchdog
        self.warm_start_timeout_s = warm_start_timeout_s
        self._lock = threading.Lock()
        self._fw_locks = {name: threading.Lock() for name in names}
        self._parents: dict[str, WarmParent] = {}
        self._closed = False

    def get(self, name: str, cmd: list[str], env_for) -> WarmParent:
        """The framework's warm parent, started (not necessarily ready) if none is alive;
        ``env_for(home)`` is its environment."""
        with self._fw_locks[name]:
            with self._lock:
                if self._closed:
                    raise WarmStartError("launcher is closed")
                wp = self._parents.get(name)
            if wp is not None and wp.alive():
                return wp
            if wp is not None:
                wp.stop()  # died: start a new one
            wp = self._start(name, cmd, env_for)
            with self._lock:
                self._parents[name] = wp
            return wp

    def parent(self, name: str) -> WarmParent | None:
        with self._lock:
            return self._parents.get(name)

    def _start(self, name: str, cmd: list[str], env_for) -> WarmParent:
        folder = _short_folder(name)
        self.watchdog.watch_dir(folder)
        os.chmod(folder, 0o700)
        home = os.path.join(folder, "home")
        os.makedirs(home)
        socket_path = os.path.join(folder, "sock")
        log_path = os.path.join(folder, "warm.log")
        full = [*cmd, "--socket", socket_path, "--driver-pid", str(os.getpid())]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env_for(home),
                cwd=home,
                start_new_session=True,
            )
        self.watchdog.watch_tree(proc.pid)
        return WarmParent(
            name, proc, folder, socket_path, log_path, time.monotonic() + self.warm_start_timeout_s, self.watchdog
        )

    def close(self) -> None:
        """Stop every warm parent (their running children are killed with them)."""
        with self._lock:
            self._closed = True
            parents, self._parents = list(self._parents.values()), {}
        for wp in parents:
            wp.stop()


def run_warm(wp: WarmParent, ctl: dict, env: dict, home: str, t_end: float, w: WriteEnd, track) -> ProcessRecord:
    """Ask the ready warm parent ``wp`` to fork a child for ``ctl``; wait until ``t_end``."""
    request = {"ctl": ctl, "env": env, "cwd": home}
    payload = (json.dumps(request) + "\n").encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rec = ProcessRecord()
    try:
        sock.settimeout(30)
        sock.connect(wp.socket_path)
        assert w.fd is not None  # the write end is closed only after the child has it
        sent = socket.send_fds(sock, [payload], [w.fd])
        sock.sendall(payload[sent:])
        w.close()  # only the child holds the write end now: its exit means EOF
        lines = _Lines(sock)
        first = lines.next(max(1.0, t_end - time.monotonic()))
        if first is None or "pid" not in first:
            rec.launch_error = f"warm parent did not start the run: {first}"
            return rec
        pid = rec.pid = first["pid"]
        track.begin(pid)
        try:
            remaining = t_end - time.monotonic()
            done = lines.next(remaining) if remaining > 0 else None
            if done is None and not lines.eof:
                rec.timed_out = True
                rec.killed = kill_tree(pid)
                done = lines.next(10.0)
            if done is not None and "status" in done:
                rec.returncode = _from_wait_status(done["status"])
                if isinstance(done.get("cpu_s"), (int, float)):
                    rec.cpu_s = float(done["cpu_s"])
            else:
                rec.launch_error = "warm parent closed the connection without the child's exit status"
                rec.killed += kill_tree(pid)
            rec.leftovers = kill_tree(pid, include_root=False)
        finally:
            track.end(pid)
        return rec
    except OSError as exc:
        rec.launch_error = f"warm parent connection failed: {type(exc).__name__}: {exc}"
        if rec.pid:
            rec.killed = kill_tree(rec.pid)
        return rec
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
