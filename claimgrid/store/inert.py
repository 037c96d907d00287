"""A ledger folder is inert data: how every command writes in or beside one.

A published ledger comes from someone else: its folder may hold a symlink, a FIFO or a
device at any name a command writes (``LEDGER.md``, ``meta.json.tmp``, ``.lock``), or a
model name that is a path. Every write of claimgrid into or beside a ledger goes through
this module (docs/CONTRACTS.md, "Ledger folders are data"):

* :func:`check_folder` - the folder's top level holds only regular files of known names
  (:data:`LEDGER_FILES`, claimgrid's own temporaries) and the real folders
  :data:`LEDGER_DIRS`; each ``runs/<id>`` is a real folder of regular files. Anything else (a symlink, a FIFO, a device, an unknown name) is refused with one
  line (:class:`UnsafeFolder`, exit 2) before anything is written; a folder that holds a
  packed ledger (:data:`PACKED_LEDGER`) and no ``meta.json`` is told to unpack it.
* :func:`write_file` - a new file is made with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (``mkstemp``)
  in the target's folder, written, fsynced and renamed over the name: a symlink planted at
  the name is refused (never followed, never replaced), its target is never opened.
* :func:`open_append` - ``runs.jsonl`` appended to through ``O_NOFOLLOW``, a regular file only.
* :func:`open_lock` - the writer's ``.lock``: ``O_NOFOLLOW``, a regular file the reader owns.
* :func:`output_folder` - a folder a command writes its output into (``compare``'s): a real
  folder, made when absent, whose files are written by :func:`write_file`.
* :func:`outside_ledgers` - an output folder is never inside a ledger folder.
* :func:`slug` - a file name from ledger data: no separator, no ``..``, bounded, with a hash
  suffix so two values never share a name.
* :func:`quarantine` - what a writer used to delete ("repair") is moved aside into
  ``quarantine/<stamp>/`` and named; no reader deletes evidence.
* :class:`AllOrNothing` - a group of writes that lands whole or not at all: every file
  written through :func:`write_file` inside it is restored to its old bytes (or removed when
  it is new) when the group fails.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from claimgrid.anybytes import utf8
from claimgrid.caps import SLUG_MAX_CHARS
from claimgrid.errors import ClaimgridError

# The regular files claimgrid writes at a ledger's top level (a replay's folder is a ledger too).
LEDGER_FILES = frozenset(
    {
        "meta.json",
        "runs.jsonl",
        "LEDGER.md",
        "RUNS.md",
        "DETAILS.md",
        "ledger.html",
        "heatmap.svg",
        "heatmap.png",  # an older release's picture: removed by the next render
        "runs.parquet",
        ".lock",
        "reclassify.txt",
        "replay.json",
        "REPLAY.md",
    }
)
QUARANTINE = "quarantine"
# A ledger published as one file (docs/<name>/ledger.tar.xz): the folder beside it is no ledger.
PACKED_LEDGER = "ledger.tar.xz"
LEDGER_DIRS = frozenset({"runs", QUARANTINE})
# claimgrid's own temporaries (mkstemp: ``.<name>.<random>.tmp``), left by a kill mid-write.
_TEMPORARY = re.compile(r"^\.[^/\0]+\.tmp$")


class UnsafeFolder(ClaimgridError):
    """A ledger (or output) folder holds something claimgrid does not write there: refused, exit 2."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "an unknown kind of file"


def _refuse(path: Path, what: str) -> UnsafeFolder:
    return UnsafeFolder(f"{path}: {what}; a ledger folder is data, nothing was written")


def check_folder(folder: Path) -> None:
    """Refuse (:class:`UnsafeFolder`, one line naming the entry) a ledger folder whose top level
    holds anything but regular files of :data:`LEDGER_FILES` (or claimgrid's temporaries) and
    the real folders :data:`LEDGER_DIRS`, or whose ``runs/`` holds anything but real folders
    of regular files. Reads only."""
    folder = Path(folder)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(folder, f"is {_kind(st.st_mode)}, not a ledger folder")
    if os.path.lexists(folder / PACKED_LEDGER) and not os.path.lexists(folder / "meta.json"):
        raise _refuse(
            folder,
            f"holds a packed ledger ({PACKED_LEDGER}), not a ledger folder: unpack it "
            f"(tar -xJf {folder / PACKED_LEDGER}) and read the folder it gives",
        )
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        mode = entry.stat(follow_symlinks=False).st_mode
        path = folder / entry.name
        if entry.name in LEDGER_DIRS:
            if not stat.S_ISDIR(mode):
                raise _refuse(path, f"is {_kind(mode)}, not a folder")
        elif entry.name in LEDGER_FILES or _TEMPORARY.match(entry.name):
            if not stat.S_ISREG(mode):
                raise _refuse(path, f"is {_kind(mode)}, not a regular file")
        else:
            what = (
                "a file claimgrid does not write there: keep it beside the folder"
                if stat.S_ISREG(mode)
                else _kind(mode)
            )
            raise _refuse(path, f"an unknown name in a ledger folder ({what})")
    runs = folder / "runs"
    if runs.is_dir():
        for entry in os.scandir(runs):
            mode = entry.stat(follow_symlinks=False).st_mode
            if not stat.S_ISDIR(mode):
                raise _refuse(runs / entry.name, f"is {_kind(mode)}, not an evidence folder")
            # Evidence and RUN.md are regular files, written flat: a FIFO would hang a reader,
            # a symlink would lead it (or a write of RUN.md) out of the folder.
            for item in os.scandir(runs / entry.name):
                mode = item.stat(follow_symlinks=False).st_mode
                if not stat.S_ISREG(mode):
                    raise _refuse(runs / entry.name / item.name, f"is {_kind(mode)}, not a regular file")


def _must_be_regular(path: Path) -> bool:
    """True when ``path`` is a regular file, False when absent; :class:`UnsafeFolder` otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise _refuse(path, f"is {_kind(mode)}, not a regular file")
    return True


def _real_folder(folder: Path) -> None:
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        raise _refuse(folder, "no such folder") from None
    if not stat.S_ISDIR(mode):
        raise _refuse(folder, f"is {_kind(mode)}, not a folder")


def plain_name(name: str) -> str:
    """``name`` when it is one plain file name (no separator, no NUL, not ``.``/``..``); else
    :class:`UnsafeFolder`."""
    if not name or "/" in name or "\0" in name or name in (".", "..") or len(name.encode("utf-8", "replace")) > 255:
        raise UnsafeFolder(f"{name!r}: not a plain file name")
    return name


# ---------------------------------------------------------------- writing


_journal: ContextVar[AllOrNothing | None] = ContextVar("claimgrid_inert_journal", default=None)


def write_file(path: Path, data: bytes | str, *, mode: int = 0o644) -> Path:
    """Write ``data`` (text as UTF-8) at ``path`` through a new temporary in its folder
    (``O_CREAT|O_EXCL|O_NOFOLLOW``), fsynced and renamed into place. The folder must be a real
    folder; an existing entry at ``path`` must be a regular file (a symlink, FIFO or device
    there is refused, :class:`UnsafeFolder`, and never opened). Returns ``path``."""
    path = Path(path)
    plain_name(path.name)
    _real_folder(path.parent)
    existed = _must_be_regular(path)
    journal = _journal.get()
    if journal is not None:
        journal.remember(path, existed)
    raw = utf8(data) if isinstance(data, str) else data  # a lone surrogate never fails the write
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def remove_file(path: Path) -> None:
    """Remove a derived file claimgrid wrote (a regular file only; absent is fine)."""
    path = Path(path)
    if _must_be_regular(path):
        journal = _journal.get()
        if journal is not None:
            journal.remember(path, True)
        path.unlink()


def open_append(path: Path) -> int:
    """A descriptor appending to the existing regular file ``path`` (``O_NOFOLLOW``)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise _refuse(Path(path), f"cannot be appended to ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refuse(Path(path), "not a regular file")
    os.set_blocking(fd, True)
    return fd


def open_lock(path: Path) -> int:
    """The writer's lock file at ``path``: opened (made when absent) with ``O_NOFOLLOW``; it must
    be a regular file owned by this user, else :class:`UnsafeFolder` (nothing written)."""
    path = Path(path)
    _real_folder(path.parent)
    _must_be_regular(path)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # another writer made it meanwhile
            fd = os.open(path, flags)
    except OSError as exc:
        raise _refuse(path, f"cannot be opened as a lock ({exc.strerror or exc})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise _refuse(path, "the lock is not a regular file owned by you")
    os.set_blocking(fd, True)
    return fd


def output_folder(folder: Path) -> Path:
    """A folder a command writes its output files into: made when absent (its parents too);
    an existing one must be a real folder. Its files are written by :func:`write_file`."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafeFolder(f"{folder}: cannot be made ({exc.strerror or exc})") from None
    _real_folder(folder)
    return folder


def outside_ledgers(out: Path, flag: str, *ledgers: Path) -> Path:
    """``out`` when it is outside every folder of ``ledgers``; else :class:`UnsafeFolder` naming
    ``flag`` (an output inside a ledger would be an unknown name there, and the ledger is data)."""
    where = Path(out).resolve()
    for ledger in ledgers:
        if where.is_relative_to(Path(ledger).resolve()):
            raise UnsafeFolder(f"{flag} {out}: inside the ledger folder {ledger}; write it beside the ledger")
    return Path(out)


def slug(text: str, limit: int = SLUG_MAX_CHARS) -> str:
    """A file-name part from ledger data: letters, digits, ``.``, ``_`` and ``-`` kept, anything
    else ``-``; no ``..`` and no leading dot (so never ``.`` or ``..``); at most ``limit`` characters; and,
    so two values never share a name, a hash suffix when anything was changed or cut."""
    text = str(text)
    kept = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]", "-", text)).lstrip(".")[:limit]
    if kept and kept == text:
        return kept
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{kept or 'x'}-{digest}"


# ---------------------------------------------------------------- no deletion


def quarantine(folder: Path, paths: list[Path], stamp: str | None = None) -> Path | None:
    """Move ``paths`` (each inside ``folder``) into ``folder/quarantine/<stamp>/``, keeping their
    place relative to ``folder``; returns that folder (None when ``paths`` is empty). Nothing is
    deleted: a reader decides what the moved files were."""
    if not paths:
        return None
    folder = Path(folder)
    stamp = stamp or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    base = folder / QUARANTINE
    if not base.exists():
        base.mkdir()
    _real_folder(base)
    target = base / stamp
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = base / f"{stamp}-{n}"
    target.mkdir()
    for path in paths:
        dest = target / Path(path).relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, dest)
    return target


def quarantine_bytes(folder: Path, name: str, data: bytes) -> Path:
    """Keep ``data`` (bytes a writer cut from a file, a torn last line) as ``quarantine/<stamp>/name``."""
    target = Path(folder) / QUARANTINE
    if not target.exists():
        target.mkdir()
    _real_folder(target)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    dest = target / stamp
    if not dest.exists():
        dest.mkdir()
    _real_folder(dest)
    path = dest / plain_name(name)
    n = 1
    while path.exists() or path.is_symlink():
        n += 1
        path = dest / f"{name}.{n}"
    return write_file(path, data)


# ---------------------------------------------------------------- all or nothing


class AllOrNothing:
    """``with AllOrNothing():`` every file written by :func:`write_file` (or removed by
    :func:`remove_file`) inside the block is restored to what it was when the block raises;
    files it made are removed. The old bytes are kept in memory (a ledger's sealed files and
    reports: small beside its evidence)."""

    def __init__(self) -> None:
        self._old: dict[Path, bytes | None] = {}

    def remember(self, path: Path, existed: bool) -> None:
        if path not in self._old:
            self._old[path] = path.read_bytes() if existed else None

    def __enter__(self) -> AllOrNothing:
        if _journal.get() is not None:
            raise RuntimeError("AllOrNothing blocks do not nest")
        self._token = _journal.set(self)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        _journal.reset(self._token)
        if kind is None:
            return
        for path, old in reversed(list(self._old.items())):
            with contextlib.suppress(OSError):
                if old is None:
                    path.unlink(missing_ok=True)
                else:
                    write_file(path, old)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[AllOrNothing]:
    """The :class:`AllOrNothing` block as a context manager function."""
    with AllOrNothing() as group:
        yield group
