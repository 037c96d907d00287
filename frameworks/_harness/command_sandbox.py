"""The command sandbox: how ``run_command`` executes the agent's shell command.

Stdlib only; runs inside each framework's venv and never imports ``claimgrid``: the
driver computes the sandbox once per run and puts it in the control JSON.

``ctl["command_sandbox"]`` (docs/CONTRACTS.md):

* an object ``{"argv_prefix": [...], "timeout_s": N}``: guarded. The command runs as
  ``argv_prefix + ["/bin/bash", "-c", command]``: a bubblewrap sandbox (claimgrid/sandbox/guard.py)
  with the workspace at ``/workspace``, no network, its own pid namespace, an
  unprivileged uid and resource limits. When bash returns, bwrap's init in that pid
  namespace exits and the kernel kills everything the command left (``setsid`` and
  ``nohup`` included); on timeout the bwrap process is killed and ``--die-with-parent``
  takes the namespace down with it.
* ``null`` / absent: unguarded (``--guard off``, or a machine without namespaces). The
  command runs ``bash -c`` in the workspace with a scrubbed environment, its own
  process group (killed whole on timeout) and, when the harness runs as root, as user
  ``nobody``. A process that leaves the group survives; that is what the guard is for.
"""

from __future__ import annotations

import os
import pwd
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
BASH = "/bin/bash"
# What is kept of one command's output (the driver sends claimgrid.caps.COMMAND_OUTPUT_KEEP_BYTES
# in ctl["budgets"]["command_output_bytes"]; this is the same figure for a bare control).
OUTPUT_KEEP_BYTES = 64 << 10
_CHUNK = 1 << 16
_DRAIN_S = 5.0  # after a kill: how long the pipe may still be read


@dataclass(frozen=True)
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool
    output_bytes: int = 0  # everything the command printed, counted
    output_cut: bool = False  # True: only the head and the tail are in ``output``


class OutputTail:
    """A byte sink of bounded size: keeps the first and the last ``keep // 2`` bytes and
    counts everything, so memory stays flat whatever a command prints."""

    def __init__(self, keep: int = OUTPUT_KEEP_BYTES):
        self.half = max(1, keep // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-self.half :]
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def cut(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.cut:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        dropped = self.total - len(self.head) - len(self.tail)
        return (
            bytes(self.head).decode("utf-8", errors="replace")
            + f"\n[... output cut by the harness: {self.total} bytes printed, {dropped} bytes in the middle"
            " not kept ...]\n" + bytes(self.tail).decode("utf-8", errors="replace")
        )


class CommandSandbox:
    """Runs shell commands for one run; ``spec`` is ``ctl["command_sandbox"]``."""

    def __init__(
        self,
        spec: dict | None,
        workspace: str,
        run_sandbox: str | None,
        timeout_s: float,
        output_keep_bytes: int = OUTPUT_KEEP_BYTES,
    ):
        self.output_keep_bytes = int(output_keep_bytes)
        self.argv_prefix = list(spec["argv_prefix"]) if spec else None
        self.timeout_s = float(spec.get("timeout_s", timeout_s)) if spec else timeout_s
        self.workspace = workspace
        self.run_sandbox = run_sandbox
        self._home = None

    @property
    def guarded(self) -> bool:
        return self.argv_prefix is not None

    def run(self, command: str) -> CommandResult:
        if self.guarded:
            argv, kw = [*self.argv_prefix, BASH, "-c", command], {"env": {}}
        else:
            home = self._unguarded_home()
            argv = ["bash", "-c", command]
            kw = {
                "cwd": self.workspace,
                **_nobody_when_root(),
                "env": {"PATH": os.path.join(home, "bin") + ":" + SAFE_PATH, "LANG": "C.UTF-8", "HOME": home},
            }
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
            **kw,
        )
        sink = OutputTail(self.output_keep_bytes)
        deadline = time.monotonic() + self.timeout_s
        try:
            finished = _stream(proc.stdout, sink, deadline)
            if not finished:
                _kill_group(proc.pid)
                # unguarded only can the pipe outlive the kill (a grandchild escaped the group)
                _stream(proc.stdout, sink, time.monotonic() + _DRAIN_S)
        finally:
            proc.stdout.close()
        if not finished:
            try:
                proc.wait(timeout=_DRAIN_S)
            except subprocess.TimeoutExpired:
                pass
            return CommandResult(sink.text(), None, True, sink.total, sink.cut)
        try:
            code = proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # closed its output but ran on past the timeout
            _kill_group(proc.pid)
            proc.wait()
            return CommandResult(sink.text(), None, True, sink.total, sink.cut)
        if not self.guarded:
            # Whatever the command left in its group goes now, as in guarded mode.
            _kill_group(proc.pid)
        return CommandResult(sink.text(), code, False, sink.total, sink.cut)

    def _unguarded_home(self) -> str:
        """A HOME for commands that the command's user cannot write (root-owned, 0555),
        with ``python`` on PATH (unguarded mode has no sandbox to provide one)."""
        if self._home is None:
            base = self.run_sandbox or self.workspace + ".sandbox"
            home = os.path.join(base, "cmdhome")
            bindir = os.path.join(home, "bin")
            os.makedirs(bindir, exist_ok=True)
            py = shutil.which("python3", path=SAFE_PATH)
            link = os.path.join(bindir, "python")
            if py and not os.path.lexists(link):
                os.symlink(py, link)
            os.chmod(bindir, 0o555)
            os.chmod(home, 0o555)
            if self.run_sandbox:
                # Traversable so nobody reaches cmdhome, but not listable or writable.
                os.chmod(self.run_sandbox, 0o711)
            self._home = home
        return self._home


def _stream(pipe, sink: OutputTail, deadline: float) -> bool:
    """Read ``pipe`` into ``sink`` until end of file (True) or ``deadline`` (False)."""
    fd = pipe.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return False
        data = os.read(fd, _CHUNK)
        if not data:
            return True
        sink.add(data)


def _nobody_when_root() -> dict:
    """Popen keyword arguments that drop root to ``nobody``; empty when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("nobody")
        uid, gid = pw.pw_uid, pw.pw_gid
    except KeyError:
        uid = gid = 65534
    return {"user": uid, "group": gid, "extra_groups": []}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
