"""The safe workspace reader: walk an agent's workspace and read its files without following
a symlink out of it and without a check-then-open race. Shared by the verifier (the diff, the
required files) and the verify cache (its key is the workspace as this reader saw it)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from claimgrid import caps

# Folder names the diff never records: interpreter caches, written by any test run.
CACHE_DIRS = {b"__pycache__"}


class LimitExceeded(Exception):
    """A verifier cap was reached; the message is the recorded reason."""


def scan_workspace(
    workspace: Path,
    max_bytes: int | None = None,
    max_files: int | None = None,
    seen: list | None = None,
    deep: list | None = None,
) -> list[tuple[bytes, int, os.stat_result]]:
    """Every entry the diff records: ``(relative path, git mode, lstat)`` for regular files
    and symlinks, symlinks never followed. Counts the *whole* workspace (``.git`` and caches
    too) against the caps before anything is read; raises :class:`LimitExceeded`.

    With ``seen`` (a list), every entry walked, folders, ``.git`` and caches included, is
    appended as ``(relative path, lstat)``: what the verify cache keys beyond the git tree.

    With ``deep`` (a list), a folder past ``caps.MAX_WORKSPACE_DEPTH``, or one the kernel
    cannot list (a path past PATH_MAX), is not entered but appended as ``(relative path,
    lstat)``, and the walk goes on: the diff of what can be read (the verifier's fallback)."""
    max_bytes = caps.MAX_WORKSPACE_BYTES if max_bytes is None else max_bytes
    max_files = caps.MAX_WORKSPACE_FILES if max_files is None else max_files
    root = os.fsencode(workspace)
    entries, total, count = [], 0, 0
    stack = [(b"", True, 0)]  # (folder, whether its entries are recorded, depth)
    while stack:
        rel_dir, inside_recorded, depth = stack.pop()
        if depth > caps.MAX_WORKSPACE_DEPTH:
            raise LimitExceeded(
                f"workspace is more than {caps.MAX_WORKSPACE_DEPTH} folders deep (cap MAX_WORKSPACE_DEPTH; "
                f"at {_shown(rel_dir)})"
            )
        try:
            it = os.scandir(os.path.join(root, rel_dir) if rel_dir else root)
        except OSError as exc:  # ENAMETOOLONG past PATH_MAX included: a recorded result
            if deep is not None and rel_dir and inside_recorded:
                deep.append((rel_dir, None))  # not listable: listed as a change by its path
                continue
            raise LimitExceeded(f"cannot list {_shown(rel_dir) or '.'}: {exc.strerror}") from exc
        with it:
            for entry in it:
                rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    if deep is not None and inside_recorded:
                        deep.append((rel, None))  # past PATH_MAX: listed as a change by its path
                        continue
                    raise LimitExceeded(f"cannot read {_shown(rel)}: {exc.strerror}") from exc
                if seen is not None:
                    seen.append((rel, st))
                count += 1
                total += st.st_size
                if count > max_files:
                    raise LimitExceeded(f"workspace has more than {max_files} entries (cap MAX_WORKSPACE_FILES)")
                if total > max_bytes:
                    raise LimitExceeded(
                        f"workspace exceeds {max_bytes} bytes of apparent size "
                        f"(cap MAX_WORKSPACE_BYTES; at {_shown(rel)})"
                    )
                is_dir = stat.S_ISDIR(st.st_mode)
                recorded = inside_recorded and not (rel == b".git" or (is_dir and entry.name in CACHE_DIRS))
                if is_dir and deep is not None and depth + 1 > caps.MAX_WORKSPACE_DEPTH:
                    if recorded:
                        deep.append((rel, st))  # not entered: listed as a change by its path
                elif is_dir:
                    stack.append((rel, recorded, depth + 1))  # walked for the caps even when not recorded
                elif recorded and stat.S_ISLNK(st.st_mode):
                    entries.append((rel, 0o120000, st))
                elif recorded and stat.S_ISREG(st.st_mode):
                    entries.append((rel, 0o100755 if st.st_mode & 0o100 else 0o100644, st))
                # sockets, fifos, devices: git records none of them either
    return entries


_DIR_AT = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_AT = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def walk_at(
    workspace: Path, max_bytes: int | None = None, max_files: int | None = None
) -> Iterator[tuple[bytes, os.stat_result, int, str]]:
    """The entries :func:`scan_workspace` records, walked by descriptors while an agent may
    still be changing the workspace (the turn snapshots): yields ``(relative path, lstat,
    folder descriptor, name)`` for each regular file and symlink, the descriptor valid until
    the next step (read the entry with :func:`read_at`).

    No path is ever resolved: the workspace is opened ``O_NOFOLLOW|O_DIRECTORY``, every folder
    is listed and ``fstatat``-ed through its own descriptor and entered by ``openat(name,
    O_NOFOLLOW|O_DIRECTORY)`` from its parent's, and must then be the folder the listing
    stat-ed (device and inode). A folder swapped for a symlink (``renameat2(RENAME_EXCHANGE)``)
    or for another folder between its listing and its entry is refused, never followed:
    :class:`LimitExceeded` "changed while it was read". The caps and what is recorded are
    :func:`scan_workspace`'s (``.git`` and interpreter caches walked for the caps, not yielded).
    One descriptor is held per level (at most ``caps.MAX_WORKSPACE_DEPTH`` + 1)."""
    max_bytes = caps.MAX_WORKSPACE_BYTES if max_bytes is None else max_bytes
    max_files = caps.MAX_WORKSPACE_FILES if max_files is None else max_files
    try:
        root = os.open(workspace, _DIR_AT)
    except OSError as exc:
        raise LimitExceeded(f"cannot list .: {exc.strerror}") from exc
    total = count = 0
    # Frames: (descriptor, folder's relative path, whether its entries are recorded, depth,
    # subfolders still to enter as (name, relative path, recorded, lstat)).
    frames: list[tuple[int, bytes, bool, int, list]] = []
    fd: int | None = root  # the folder being listed, not yet in a frame
    try:
        rel_dir, recorded_here, depth = b"", True, 0
        while True:
            assert fd is not None
            subdirs = []
            try:
                with os.scandir(fd) as it:
                    listed = list(it)
            except OSError as exc:
                raise LimitExceeded(f"cannot list {_shown(rel_dir) or '.'}: {exc.strerror}") from exc
            for entry in listed:
                bname = os.fsencode(entry.name)
                rel = rel_dir + b"/" + bname if rel_dir else bname
                try:
                    st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                except OSError as exc:
                    raise LimitExceeded(f"cannot read {_shown(rel)}: {exc.strerror}") from exc
                count += 1
                total += st.st_size
                if count > max_files:
                    raise LimitExceeded(f"workspace has more than {max_files} entries (cap MAX_WORKSPACE_FILES)")
                if total > max_bytes:
                    raise LimitExceeded(
                        f"workspace exceeds {max_bytes} bytes of apparent size (cap MAX_WORKSPACE_BYTES; at {_shown(rel)})"
                    )
                is_dir = stat.S_ISDIR(st.st_mode)
                recorded = recorded_here and not (rel == b".git" or (is_dir and bname in CACHE_DIRS))
                if is_dir:
                    subdirs.append((entry.name, rel, recorded, st))
                elif recorded and (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    yield rel, st, fd, entry.name
            frames.append((fd, rel_dir, recorded_here, depth, subdirs))
            fd = None
            # The next folder to enter: the deepest frame's next subfolder; finished frames closed.
            while frames and not frames[-1][4]:
                done = frames.pop()
                os.close(done[0])
            if not frames:
                return
            parent_fd, _, _, parent_depth, todo = frames[-1]
            name, rel_dir, recorded_here, listed_st = todo.pop()
            depth = parent_depth + 1
            if depth > caps.MAX_WORKSPACE_DEPTH:
                raise LimitExceeded(
                    f"workspace is more than {caps.MAX_WORKSPACE_DEPTH} folders deep (cap MAX_WORKSPACE_DEPTH; "
                    f"at {_shown(rel_dir)})"
                )
            fd = _enter_at(parent_fd, name, rel_dir, listed_st)
    finally:
        for frame in frames:
            os.close(frame[0])
        if fd is not None:
            os.close(fd)


def _enter_at(parent_fd: int, name: str, rel: bytes, listed: os.stat_result) -> int:
    """The descriptor of subfolder ``name`` of ``parent_fd``, opened without following a link,
    and the very folder the listing saw; else :class:`LimitExceeded` (it changed meanwhile)."""
    try:
        fd = os.open(name, _DIR_AT, dir_fd=parent_fd)
    except OSError as exc:  # ELOOP / ENOTDIR: now a symlink or a file; ENOENT: gone
        raise LimitExceeded(f"{_shown(rel)} changed while it was read ({exc.strerror})") from exc
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (listed.st_dev, listed.st_ino):
        os.close(fd)
        raise LimitExceeded(f"{_shown(rel)} changed while it was read (another folder)")
    return fd


def read_at(dir_fd: int, name: str, rel: bytes, st: os.stat_result) -> bytes:
    """The content of entry ``name`` of the open folder ``dir_fd`` as :func:`walk_at` stat-ed
    it (``st``): a symlink's target text (``readlinkat``, never followed), a regular file's
    bytes (opened ``O_NOFOLLOW`` relative to ``dir_fd``, and only if it is still the same
    file, no larger). Anything else: :class:`LimitExceeded` "changed while it was read"."""
    if stat.S_ISLNK(st.st_mode):
        try:
            return os.readlink(os.fsencode(name), dir_fd=dir_fd)
        except OSError as exc:  # EINVAL: no longer a link
            raise LimitExceeded(f"{_shown(rel)} changed while it was read ({exc.strerror})") from exc
    try:
        fd = os.open(name, _FILE_AT, dir_fd=dir_fd)
    except OSError as exc:  # ELOOP: now a symlink; ENOENT: gone
        raise LimitExceeded(f"{_shown(rel)} changed while it was read ({exc.strerror})") from exc
    try:
        now = os.fstat(fd)
        same = (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
        if not same or not stat.S_ISREG(now.st_mode) or now.st_size > st.st_size:
            raise LimitExceeded(f"{_shown(rel)} changed while it was read")
        return _read_upto(fd, st.st_size)
    finally:
        os.close(fd)


def _read_upto(fd: int, size: int) -> bytes:
    """At most ``size`` bytes of ``fd`` (its size when it was stat'ed: a file that grew since is
    read only that far), in 1 MiB reads."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _shown(rel: bytes, limit: int = 300) -> str:
    """A workspace path for a recorded reason: decoded losslessly, its middle cut when long."""
    text = os.fsdecode(rel)
    return text if len(text) <= limit else f"{text[:100]}...[{len(text)} characters]...{text[-100:]}"


def read_nofollow(root: bytes, rel: bytes, st: os.stat_result) -> bytes:
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(os.path.join(root, rel))
    fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or now.st_size > st.st_size:
            raise LimitExceeded(f"{os.fsdecode(rel)} changed while the verifier read it")
        return _read_upto(fd, st.st_size)
    finally:
        os.close(fd)


def _open_inside(workspace: Path, rel: str) -> tuple[int | None, str]:
    """A descriptor for ``rel`` opened component by component without leaving the workspace
    (``O_NOFOLLOW`` at every step; a symlink is resolved by the harness and followed only
    while it stays inside). (None, why) when it is missing or leads outside."""
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    stack = [root]  # descriptors of the folders walked so far; stack[0] is the workspace
    hops = 0
    try:
        while parts:
            name = parts.pop(0)
            if name == "..":
                if len(stack) == 1:
                    return None, f"{rel} leads outside the workspace"
                os.close(stack.pop())
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=stack[-1])
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    return None, f"{rel} is missing"
                hops += 1
                target = os.readlink(name, dir_fd=stack[-1])
                if hops > 40 or target.startswith("/"):
                    return None, f"{rel} is a symlink out of the workspace"
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                continue
            stack.append(fd)
        return os.dup(stack[-1]), ""
    finally:
        for fd in stack:
            os.close(fd)


def workspace_file(workspace: Path, rel: str) -> tuple[bytes | None, str]:
    """The bytes of a regular file inside the workspace, or (None, why)."""
    fd, why = _open_inside(workspace, rel)
    if fd is None:
        return None, why
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{rel} is not a file"
        if st.st_size > caps.MAX_CHECKED_FILE_BYTES:
            return None, f"{rel} is over {caps.MAX_CHECKED_FILE_BYTES} bytes (cap MAX_CHECKED_FILE_BYTES)"
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(caps.MAX_CHECKED_FILE_BYTES + 1), ""
    finally:
        os.close(fd)


def workspace_exists(workspace: Path, rel: str) -> bool:
    fd, _ = _open_inside(workspace, rel)
    if fd is not None:
        os.close(fd)
    return fd is not None


def cache_dirs(workspace: Path) -> list[str]:
    """Interpreter-cache folders (``__pycache__``, real folders only, outside the top-level
    ``.git``), relative, outermost only. The diff does not record them, so the test run must
    not read them either: a planted ``.pyc`` with the source's mtime would run unseen."""
    # Walked without recursion (os.walk recurses: a 1,200-level tree overflowed it) and no
    # deeper than caps.MAX_WORKSPACE_DEPTH, the diff's own bound; unreadable folders are skipped.
    found = []
    stack = [("", 0)]
    while stack:
        rel_dir, depth = stack.pop()
        try:
            with os.scandir(os.path.join(workspace, rel_dir) if rel_dir else workspace) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            continue
        for name, is_dir in entries:
            if not is_dir or (not rel_dir and name == ".git"):
                continue
            rel = os.path.join(rel_dir, name) if rel_dir else name
            if os.fsencode(name) in CACHE_DIRS:
                found.append(rel)
            elif depth + 1 <= caps.MAX_WORKSPACE_DEPTH:
                stack.append((rel, depth + 1))
    return sorted(found)
