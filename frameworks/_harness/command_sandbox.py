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
import shutil
import signal
import subprocess
from dataclasses import dataclass

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
BASH = "/bin/bash"


@dataclass(frozen=True)
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool


class CommandSandbox:
    """Runs shell commands for one run; ``spec`` is ``ctl["command_sandbox"]``."""

    def __init__(self, spec: dict | None, workspace: str, run_sandbox: str | None, timeout_s: float):
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
            kw = {"cwd": self.workspace, **_nobody_when_root(),
                  "env": {"PATH": os.path.join(home, "bin") + ":" + SAFE_PATH, "LANG": "C.UTF-8", "HOME": home}}
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                close_fds=True, start_new_session=True, **kw)
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            try:
                out, _ = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                out = b""  # unguarded only: a grandchild escaped the group and holds the pipe
            return CommandResult(out.decode("utf-8", errors="replace"), None, True)
        if not self.guarded:
            # Whatever the command left in its group goes now, as in guarded mode.
            _kill_group(proc.pid)
        return CommandResult(out.decode("utf-8", errors="replace"), proc.returncode, False)

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
