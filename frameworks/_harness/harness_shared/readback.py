"""Reading back a file from a place an agent could write: the one way the harness does it.

A coding agent's adapter runs as the driver's user (root in CI) outside the agent's sandbox and
reads what the agent left (Codex's last message, mini-swe-agent's trajectory); the launcher
reads the adapter's outcome file. Any of them could have been replaced, after the agent's last
word, by a symlink to a host-only file (the ledger's signing key, /etc/shadow), a hardlink to
one, a FIFO (an ``open`` that never returns) or a file of gigabytes. :func:`read_back` opens
such a file so that none of that works (stdlib only: it runs in every framework's venv and is
imported by the driver too, claimgrid.launch.outcome):

* from a descriptor of the folder the harness made (``root``), never by a path walked from
  ``/``: ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``
  where the kernel has it (Linux 5.6+), else each component opened with ``O_NOFOLLOW`` from
  the previous one's descriptor, every folder checked with ``fstat``; ``..``, absolute and
  empty components are refused either way;
* ``O_NONBLOCK | O_NOCTTY``: a FIFO or a device opens at once and is then refused, a terminal
  never becomes the process's;
* only a regular file with one link (a hardlink's second name is refused: it could be a
  host file's), owned by ``owner`` when given (the run's uid: a file the agent did not write
  is not its report), of at most ``limit`` bytes (read to ``limit + 1`` so a file that grows
  while read is caught too).

It returns the bytes, None when there is no file (the agent wrote none), or a
:class:`Refusal` naming what was found instead ("final report not a regular file: symlink"):
a refusal is evidence to record, and the run is classified from the rest.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass

# The largest file read back: 64 MiB. A trajectory of a long real-model run (every message
# with its full response JSON) is a few MB; the gateway already caps what one run can
# exchange (caps.MAX_REQUEST_BYTES a request), so more than this is not the agent's record.
MAX_READBACK_BYTES = 64 << 20

# openat2(2): the syscall number is 437 on every architecture that has the generic table
# (x86_64, aarch64, riscv64 ...); RESOLVE_* from linux/openat2.h.
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Refusal:
    """Why a file was not read back: ``what`` (e.g. "final report") and ``reason`` ("symlink")."""

    what: str
    path: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.what} not a regular file: {self.reason}"
            if self.reason in _NOT_REGULAR
            else (f"{self.what} refused: {self.reason}")
        )

    def as_event(self) -> dict:
        """The fields of the runtime ``readback_refused`` event that records it."""
        return {"what": self.what, "path": self.path, "reason": self.reason, "message": str(self)}


_NOT_REGULAR = ("symlink", "fifo", "socket", "directory", "character device", "block device", "unknown type")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "unknown type"


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = None
_has_openat2: bool | None = None  # None: not tried yet


def _openat2(dir_fd: int, rel: str) -> int | None:
    """A descriptor by openat2, or None where the kernel (or libc) has no openat2."""
    global _libc, _has_openat2
    if _has_openat2 is False:
        return None
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.syscall.restype = ctypes.c_long
        how = _OpenHow(_OPEN_FLAGS, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        fd = _libc.syscall(
            ctypes.c_long(SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(rel)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    except (OSError, AttributeError):
        _has_openat2 = False
        return None
    if fd >= 0:
        _has_openat2 = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and _has_openat2 is None:  # EPERM: a seccomp filter
        _has_openat2 = False
        return None
    raise OSError(err, os.strerror(err), rel)


def _walk(dir_fd: int, parts: list[str]) -> int:
    """The fallback: each component by O_NOFOLLOW from the previous descriptor."""
    fd = os.dup(dir_fd)
    try:
        for name in parts[:-1]:
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise OSError(errno.ENOTDIR, "not a directory", name)
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _lstat_kind(dir_fd: int, parts: list[str]) -> str:
    """What stands in the way, for a refusal's reason (best effort, never followed)."""
    fd = os.dup(dir_fd)
    try:
        for n, name in enumerate(parts):
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if n == len(parts) - 1 or not stat.S_ISDIR(st.st_mode):
                return _kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else "changed while opened"
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        return exc.strerror or "unreadable"
    finally:
        os.close(fd)
    return "symlink"


def read_back(
    root: str, rel: str, what: str = "file", *, limit: int = MAX_READBACK_BYTES, owner: int | None = None
) -> bytes | Refusal | None:
    """The bytes of ``rel`` under the folder ``root`` (module docstring), None when there is
    no such file, or a :class:`Refusal` (``what`` names the file in its message). ``root``
    itself is the harness's: it is opened as given (its last component without following)."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return Refusal(what, rel, "path leaves its folder")
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Refusal(what, rel, f"its folder: {exc.strerror}")
    try:
        try:
            fd = _openat2(dir_fd, rel)
            if fd is None:
                fd = _walk(dir_fd, parts)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR, errno.ENXIO, errno.EOPNOTSUPP):
                return Refusal(what, rel, _lstat_kind(dir_fd, parts))
            return Refusal(what, rel, exc.strerror or type(exc).__name__)
        try:
            return _read(fd, what, rel, limit, owner)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _read(fd: int, what: str, rel: str, limit: int, owner: int | None) -> bytes | Refusal:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return Refusal(what, rel, _kind(st.st_mode))
    if st.st_nlink != 1:
        return Refusal(what, rel, f"hardlink ({st.st_nlink} links)")
    if owner is not None and st.st_uid != owner:
        return Refusal(what, rel, f"owned by uid {st.st_uid}, not the run's {owner}")
    if st.st_size > limit:
        return Refusal(what, rel, f"{st.st_size} bytes, over the {limit}-byte limit")
    chunks, got = [], 0
    while got <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > limit:
        return Refusal(what, rel, f"grew over the {limit}-byte limit while read")
    return b"".join(chunks)


def read_back_path(path: str, what: str = "file", **kw) -> bytes | Refusal | None:
    """:func:`read_back` of ``path``'s name in its folder (the folder the harness's)."""
    folder, name = os.path.split(path)
    return read_back(folder or ".", name, what, **kw)
