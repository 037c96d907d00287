"""Per-run resource boxes: process, pid and memory limits one run cannot exhaust for another.

``prlimit`` limits are per process, and ``RLIMIT_NPROC`` counts the processes of a *uid*
across the whole machine: with every sandbox running as ``nobody``, a fork bomb in one run
made every other sandbox on the machine (other grids included) fail to start. A box gives
each run two things, for the agent's commands and for the verifier's test run of that run:

* **its own uid** (when the harness is root): leased from a range no account uses
  (:data:`UID_BASE` upwards, above systemd's container range), one per run in flight on the
  machine. A lease is an ``flock`` on ``<lock folder>/<uid>``, held by the driver for the
  run's life, so two grids on one machine never share a uid, and the lock goes with the
  process however it ends; a uid some live process still runs as is skipped. The per-process
  ``RLIMIT_NPROC`` then bounds that run alone.
* **its own cgroup** where the machine lets the harness create one (:func:`detect`): cgroup
  v2 with the ``pids`` and ``memory`` controllers under a group the driver may write, else
  cgroup v1 ``pids``/``memory`` hierarchies below the driver's own groups (so the machine's
  accounting of the driver still holds). ``pids.max`` and the memory limit then bound the
  whole run: three 1.2 GiB processes no longer all fit in a 2 GiB box. The group is joined
  before bwrap starts (:meth:`Box.join_argv`) and removed when the run ends; a driver killed
  with -9 leaves groups its watchdog removes, and the next start removes any group whose
  driver is gone.

Which mechanism is in force is a parity fact (:meth:`Boxes.facts`); without either (not root,
no writable cgroup) the run still has its per-process limits, and the facts say so.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import re
import secrets
import signal
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field

from claimgrid.errors import ClaimgridError

# Above systemd's container uid range (524288..1879048191) and below 2^31: no account, no
# container mapping, and every tool that stores uids as signed 32-bit numbers copes.
UID_BASE = 0x70000000
UID_COUNT = 4096
NOBODY = 65534
LOCK_DIRS = ("/run/claimgrid-uids", os.path.join(tempfile.gettempdir(), "claimgrid-uids"))
GROUP_PREFIX = "claimgrid-"
# A group is named claimgrid-<pid namespace>-<driver pid>-<random>: a pid is only looked up
# in the namespace it belongs to, so a driver of another container is never taken for dead.
_GROUP_RE = re.compile(rf"^{GROUP_PREFIX}(\d+)-(\d+)-[0-9a-f]+$")
# A sandbox joins its box's cgroups before bwrap starts: the shell writes its own pid into each
# cgroup.procs file, then execs the rest of the argv (a failure exits 125 before anything runs).
_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass
class Box:
    """One run's lease: ``uid``/``gid`` its sandboxes run as, ``procs`` the cgroup.procs files
    they join (empty: no cgroup), ``groups`` the cgroup folders (removed by :meth:`release`)."""

    uid: int = NOBODY
    gid: int = NOBODY
    procs: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    _lock_fd: int | None = field(default=None, repr=False)

    def join_argv(self) -> list[str]:
        """The argv prefix that moves the sandbox into this box's cgroups ([] without one)."""
        if not self.procs:
            return []
        return ["/bin/sh", "-c", _JOIN_SCRIPT, "claimgrid-join", *self.procs, "--"]

    def usage(self) -> dict:
        """What the box's cgroups counted (peak pids, peak memory, limit hits), for the record."""
        out: dict = {}
        for group in self.groups:
            for name, key in (
                ("pids.peak", "pids_peak"),
                ("memory.peak", "memory_peak_bytes"),
                ("memory.max_usage_in_bytes", "memory_peak_bytes"),
                ("memory.failcnt", "memory_limit_hits"),
            ):
                value = _read_int(os.path.join(group, name))
                if value is not None:
                    out[key] = value
            events = _read(os.path.join(group, "pids.events"))
            for line in (events or "").splitlines():
                k, _, v = line.partition(" ")
                if k == "max" and v.strip().isdigit():
                    out["pids_limit_hits"] = int(v)
        return out

    def end_processes(self, wait_s: float = 10.0) -> int:
        """SIGKILL every process still in the box (its cgroups; its uid when it is the run's own,
        never ``nobody``) and wait until none is left: the driver's check, after the adapter
        exited and before the verifier reads the workspace. Returns how many it killed (0: the
        adapter's own reaper left none, frameworks/_harness/reaper.py); raises ClaimgridError
        when some outlive ``wait_s``."""
        killed: set[int] = set()
        deadline = time.monotonic() + wait_s
        while True:
            pids = {int(p) for g in self.groups for p in (_read(os.path.join(g, "cgroup.procs")) or "").split()}
            if self.uid != NOBODY:
                pids |= _uid_pids(self.uid)
            if not pids:
                return len(killed)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            killed |= pids
            if time.monotonic() > deadline:
                raise ClaimgridError(
                    f"processes of uid {self.uid} outlived SIGKILL for {wait_s:g} s: {sorted(pids)[:10]}"
                )
            time.sleep(0.01)

    def release(self) -> None:
        """Kill whatever is still in the box's cgroups, remove them, give the uid back."""
        for group in self.groups:
            remove_group(group)
        self.groups = self.procs = ()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None


class Boxes:
    """The machine's box mechanism (detected once per grid) and the leases of one driver."""

    def __init__(self, *, as_root: bool, pids: int, memory_bytes: int, cgroup_root: str = "/sys/fs/cgroup"):
        self.as_root = as_root
        self.pids, self.memory_bytes = pids, memory_bytes
        self.lock_dir = _lock_dir() if as_root else None
        self.cgroup, self.cgroup_reason = _cgroup_parents(cgroup_root) if as_root else (None, "not root")
        self._lock = threading.Lock()
        for parent in (self.cgroup or {}).get("parents", {}).values():
            remove_stale_groups(parent)

    def facts(self) -> dict:
        """Parity facts: which mechanism bounds a run's processes and memory."""
        if self.as_root and self.lock_dir is not None:
            uid = f"one per run from {UID_BASE} (flock in {self.lock_dir})"
        else:
            uid = "shared (nobody when root, else the invoking user)"
        out: dict = {"uid": uid}
        if self.cgroup:
            out["cgroup"] = {
                "version": self.cgroup["version"],
                "controllers": sorted(self.cgroup["parents"]),
                "pids_max": self.pids,
                "memory_max_bytes": self.memory_bytes,
            }
        else:
            out["cgroup"] = None
            out["cgroup_reason"] = self.cgroup_reason
        return out

    def lease(self) -> Box:
        """A box for one run; :meth:`Box.release` gives it back. Raises ClaimgridError when
        every uid of the range is leased or in use (more runs in flight than the range)."""
        uid, fd = (NOBODY, None)
        if self.as_root and self.lock_dir is not None:
            with self._lock:
                uid, fd = _lease_uid(self.lock_dir)
        box = Box(uid=uid, gid=uid, _lock_fd=fd)
        if self.cgroup:
            name = f"{GROUP_PREFIX}{_pid_ns()}-{os.getpid()}-{secrets.token_hex(4)}"
            groups, procs = [], []
            try:
                for controller, parent in sorted(self.cgroup["parents"].items()):
                    group = os.path.join(parent, name)
                    if group in groups:
                        continue  # cgroup v2: one folder for both controllers
                    os.mkdir(group, 0o755)
                    groups.append(group)
                    procs.append(os.path.join(group, "cgroup.procs"))
                    _set_limits(group, self.cgroup["version"], controller, self.pids, self.memory_bytes)
            except OSError:
                box.groups = tuple(groups)
                box.release()
                raise
            box.groups, box.procs = tuple(groups), tuple(procs)
        return box


# --------------------------------------------------------------------------- uids


def _lock_dir() -> str | None:
    """A root-owned 0700 folder for the uid locks (the first of LOCK_DIRS that can be one)."""
    for folder in LOCK_DIRS:
        try:
            os.makedirs(folder, 0o700, exist_ok=True)
            st = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            return folder
    return None


def _live_uids() -> set[int]:
    uids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uids.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                continue
    return uids


def _uid_pids(uid: int) -> set[int]:
    """Live (not zombie) processes whose /proc entry is ``uid``'s."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/stat", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            if raw[raw.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
                out.add(int(name))
    return out


def _named(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _lease_uid(lock_dir: str) -> tuple[int, int]:
    busy = _live_uids()
    for uid in range(UID_BASE, UID_BASE + UID_COUNT):
        if uid in busy or _named(uid):
            continue
        fd = os.open(os.path.join(lock_dir, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            raise
        return uid, fd
    raise ClaimgridError(f"no free sandbox uid in {UID_BASE}..{UID_BASE + UID_COUNT - 1}: too many runs in flight")


# --------------------------------------------------------------------------- cgroups


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    text = (_read(path) or "").strip()
    return int(text) if text.isdigit() else None


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _mounts() -> list[tuple[str, str, set[str]]]:
    out = []
    for line in (_read("/proc/self/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[1], parts[2], set(parts[3].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """controller ("" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _pid_ns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _probe(parent: str) -> bool:
    name = os.path.join(parent, f"{GROUP_PREFIX}{_pid_ns()}-{os.getpid()}-probe")
    try:
        os.mkdir(name)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        os.rmdir(name)
    except OSError:
        return False
    return True


def _cgroup_parents(root: str) -> tuple[dict | None, str | None]:
    """({"version", "parents": {controller: folder}}, None) where per-run groups can be made,
    else (None, why not)."""
    mounts = [m for m in _mounts() if m[0].startswith(root)]
    own = _own_paths()
    reasons = []
    for mount, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        controllers = set((_read(os.path.join(mount, "cgroup.controllers")) or "").split())
        if not {"pids", "memory"} <= controllers:
            reasons.append(f"cgroup v2 at {mount} offers {' '.join(sorted(controllers)) or 'no controllers'}")
            continue
        if own.get("", "/") != "/":
            # The driver's own group holds processes: a v2 group with processes cannot hand
            # controllers to children; per-run groups need an empty delegated parent.
            reasons.append(f"cgroup v2: the driver's group {own['']} is not delegated to it")
            continue
        parent = os.path.join(mount, "claimgrid")
        try:
            os.makedirs(parent, exist_ok=True)
            enabled = set((_read(os.path.join(mount, "cgroup.subtree_control")) or "").split())
            if not {"pids", "memory"} <= enabled:
                _write(os.path.join(mount, "cgroup.subtree_control"), "+pids +memory")
            _write(os.path.join(parent, "cgroup.subtree_control"), "+pids +memory")
        except OSError as exc:
            reasons.append(f"cgroup v2 at {mount}: {exc.strerror}")
            continue
        if _probe(parent):
            return {"version": 2, "parents": {"pids": parent, "memory": parent}}, None
        reasons.append(f"cgroup v2 at {mount}: cannot create a group")
    parents = {}
    for controller in ("pids", "memory"):
        mount = next((m for m, t, opts in mounts if t == "cgroup" and controller in opts), None)
        if mount is None:
            reasons.append(f"no cgroup v1 {controller} hierarchy")
            continue
        parent = os.path.join(mount, own.get(controller, "/").lstrip("/"))
        if _probe(parent):
            parents[controller] = parent.rstrip("/")
        else:
            reasons.append(f"cgroup v1 {controller}: cannot create a group under {parent}")
    if parents:
        return {"version": 1, "parents": parents}, None
    return None, "; ".join(reasons) or "no cgroup hierarchy mounted"


def _set_limits(group: str, version: int, controller: str, pids: int, memory_bytes: int) -> None:
    if version == 2:
        _write(os.path.join(group, "pids.max"), str(pids))
        _write(os.path.join(group, "memory.max"), str(memory_bytes))
        if os.path.exists(os.path.join(group, "memory.swap.max")):
            _write(os.path.join(group, "memory.swap.max"), "0")
    elif controller == "pids":
        _write(os.path.join(group, "pids.max"), str(pids))
    else:
        _write(os.path.join(group, "memory.limit_in_bytes"), str(memory_bytes))
        if os.path.exists(os.path.join(group, "memory.memsw.limit_in_bytes")):
            _write(os.path.join(group, "memory.memsw.limit_in_bytes"), str(memory_bytes))


def remove_group(group: str, wait_s: float = 3.0) -> bool:
    """SIGKILL every process in ``group`` and remove it; False if it is still there after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        for pid in (_read(os.path.join(group, "cgroup.procs")) or "").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            os.rmdir(group)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def remove_stale_groups(parent: str) -> int:
    """Remove the groups of drivers that are gone (killed with -9 before their watchdog ran)."""
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    for name in names:
        m = _GROUP_RE.match(name)
        if m is None or int(m.group(1)) != _pid_ns():
            continue
        pid = int(m.group(2))
        if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        removed += remove_group(os.path.join(parent, name), wait_s=1.0)
    return removed
