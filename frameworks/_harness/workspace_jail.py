"""The workspace path jail: every file-tool path is resolved without leaving the workspace.

Stdlib only; runs inside each framework's venv, usually as root.

How (docs/CONTRACTS.md, "tool layer"): an agent path is split into components and
walked one component at a time from a descriptor of the workspace root, each step an
``openat``-style ``os.open(name, O_PATH | O_NOFOLLOW, dir_fd=...)``. Nothing is ever
opened by a full path, so there is no check-then-open window: a folder swapped for a
symlink between two steps makes the next ``O_NOFOLLOW`` open fail (refused) instead of
being followed. A symlink met on the way is read and its target walked the same way,
from the folder it sits in (relative target) or from the root (absolute target naming a
path under the workspace); a target that climbs above the root or names anything else
is refused. The final file is opened with ``O_NOFOLLOW`` relative to its folder's
descriptor, so the object read or written is the one the walk checked.

``Jail.snapshot`` walks the same way (descriptors, never following links) to fingerprint
the workspace before and after a call.
"""

from __future__ import annotations

import hashlib
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass

SNAPSHOT_HASH_MAX = 1 << 20  # files up to 1 MiB are hashed; larger ones by size+mtime
SNAPSHOT_SKIP = {".git", "__pycache__"}
# A walk holds one descriptor per level: deeper folders are listed as cut, not entered (a
# 1,200-level tree must not exhaust descriptors or recursion). Real repositories are a few
# dozen levels deep. Entries past SNAPSHOT_MAX_ENTRIES are not fingerprinted either (the
# verifier's own cap, caps.MAX_WORKSPACE_FILES, is the same figure). Both cuts are recorded.
SNAPSHOT_MAX_DEPTH = 64
SNAPSHOT_MAX_ENTRIES = 20_000
MAX_LINKS = 40  # symlinks followed in one resolution (the kernel's own limit)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class ToolRefused(Exception):
    """A call the tool layer declines (bad path, bad argument); becomes ok=false."""


@dataclass
class Node:
    """A resolved path: ``name`` inside the open folder ``dir_fd`` (``name`` None: the
    folder itself). ``rel`` is the workspace-relative path; ``exists`` whether ``name``
    was there when resolved. The caller closes ``dir_fd`` (use ``Jail.node``)."""

    dir_fd: int
    name: str | None
    rel: str
    exists: bool


class Jail:
    """Resolves and opens agent-given paths strictly inside ``root``.

    ``aliases``: other absolute spellings of the root the agent may use (the command
    sandbox shows the workspace at ``/workspace``). Files and folders the tools create
    get the root's owner (the sandbox uid when the harness runs as root and the
    workspace was handed to it) or, when the root is root-owned, world-writable modes
    (unguarded mode, where commands run as ``nobody``).
    """

    def __init__(self, root: str, aliases: tuple[str, ...] = ()):
        self.root = os.path.realpath(root)
        self.aliases = tuple(a.rstrip("/") for a in aliases if a)
        st = os.stat(self.root)
        self.owner = (st.st_uid, st.st_gid)

    # ------------------------------------------------------------ resolution

    def _components(self, path) -> list[str]:
        if not isinstance(path, str) or path == "":
            raise ToolRefused("path must be a non-empty string")
        if "\x00" in path:
            raise ToolRefused("path contains a NUL byte")
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            raise ToolRefused("path holds a character with no file-system form (a lone surrogate)") from None
        if os.path.isabs(path):
            for prefix in (self.root, *self.aliases):
                if path == prefix or path.startswith(prefix + "/"):
                    return [c for c in path[len(prefix) :].split("/") if c]
            raise ToolRefused(f"path '{path}' is outside the workspace")
        return [c for c in path.split("/") if c]

    @contextmanager
    def node(self, path, create_dirs: bool = False):
        """Resolve ``path`` (following in-workspace symlinks, the last one included);
        yields a :class:`Node` and closes its descriptor afterwards."""
        node = self._resolve(path, create_dirs)
        try:
            yield node
        finally:
            os.close(node.dir_fd)

    def _resolve(self, path, create_dirs: bool) -> Node:
        todo = self._components(path)
        todo.reverse()  # a stack: next component at the end
        stack = [os.open(self.root, _DIR_FLAGS)]
        names: list[str] = []
        links = retries = 0
        try:
            while todo:
                part = todo.pop()
                if part == ".":
                    continue
                if part == "..":
                    if not names:
                        raise ToolRefused(f"path '{path}' is outside the workspace")
                    os.close(stack.pop())
                    names.pop()
                    continue
                cur = stack[-1]
                try:
                    fd = os.open(part, _PATH_FLAGS, dir_fd=cur)
                except FileNotFoundError:
                    if todo and create_dirs:
                        retries += 1
                        if retries > MAX_LINKS:
                            raise ToolRefused(f"'{path}' keeps changing while it is resolved") from None
                        try:
                            os.mkdir(part, 0o777, dir_fd=cur)
                            self._adopt(part, cur, is_dir=True)
                        except FileExistsError:
                            pass  # made by someone else meanwhile: walk it like any other
                        except OSError as exc:
                            raise ToolRefused(f"'{path}' changed while it was resolved ({exc.strerror})") from None
                        todo.append(part)  # open it like any other folder (never followed)
                        continue
                    if todo:
                        raise ToolRefused(f"'{path}': folder '{'/'.join([*names, part])}' does not exist") from None
                    return self._done(stack, names, part, exists=False)
                try:
                    st = os.fstat(fd)
                    if stat.S_ISLNK(st.st_mode):
                        links += 1
                        if links > MAX_LINKS:
                            raise ToolRefused(f"'{path}': too many symlinks")
                        try:
                            target = os.readlink(part, dir_fd=cur)
                        except OSError as exc:
                            # Removed or replaced between the fstat and the read (a swap race).
                            raise ToolRefused(f"'{path}' changed while it was resolved ({exc.strerror})") from None
                        todo.extend(reversed(self._link_target(path, target, names, stack)))
                        continue
                    if not todo:
                        return self._done(stack, names, part, exists=True)
                    if not stat.S_ISDIR(st.st_mode):
                        raise ToolRefused(f"'{path}': '{'/'.join([*names, part])}' is not a folder")
                finally:
                    os.close(fd)
                try:
                    stack.append(os.open(part, _DIR_FLAGS, dir_fd=cur))
                except OSError as exc:
                    # Replaced by a symlink (ELOOP) or a file since the check: refused, not followed.
                    raise ToolRefused(f"'{path}' changed while it was resolved ({exc.strerror})") from None
                names.append(part)
            return self._done(stack, names, None, exists=True)
        except BaseException:
            for fd in stack:
                os.close(fd)
            raise

    def _link_target(self, path: str, target: str, names: list[str], stack: list[int]) -> list[str]:
        """Components to walk instead of a symlink. An absolute target restarts from the
        root (only when it names a path under the workspace)."""
        if not os.path.isabs(target):
            return [c for c in target.split("/") if c]
        for prefix in (self.root, *self.aliases):
            if target == prefix or target.startswith(prefix + "/"):
                while len(stack) > 1:
                    os.close(stack.pop())
                names.clear()
                return [c for c in target[len(prefix) :].split("/") if c]
        raise ToolRefused(f"path '{path}' is outside the workspace (a symlink points to {target})")

    def _done(self, stack: list[int], names: list[str], name: str | None, exists: bool) -> Node:
        dir_fd = stack.pop()
        for fd in stack:
            os.close(fd)
        stack.clear()
        if name is None and names:
            # The path names a folder: address it as name-in-parent only when asked; the
            # folder descriptor itself is what callers need.
            return Node(dir_fd, None, "/".join(names), True)
        rel = "/".join([*names, name]) if name else "."
        return Node(dir_fd, name, rel, exists)

    # ------------------------------------------------------------ file operations

    def read_bytes(self, path) -> tuple[bytes, str]:
        data, rel, _ = self.read_head(path, None)
        return data, rel

    def read_head(self, path, limit: int | None) -> tuple[bytes, str, int]:
        """(at most ``limit`` bytes from the start of the file, rel, its size); ``limit``
        None reads it whole. Nothing past ``limit`` is read (a sparse 255 MB file costs
        ``limit`` bytes)."""
        with self.node(path) as node:
            if not node.exists:
                raise ToolRefused(f"'{path}' is not a file")
            if node.name is None:
                raise ToolRefused(f"'{path}' is not a file")
            fd = self._open_file(node, os.O_RDONLY | os.O_NONBLOCK, path)
            with os.fdopen(fd, "rb") as fh:
                size = os.fstat(fd).st_size
                return (fh.read() if limit is None else fh.read(limit)), node.rel, size

    def write_bytes(self, path, data: bytes, must_exist: bool = False) -> str:
        with self.node(path, create_dirs=not must_exist) as node:
            if node.name is None:
                raise ToolRefused(f"'{path}' is a directory")
            if must_exist and not node.exists:
                raise ToolRefused(f"'{path}' is not a file")
            fd = self._open_file(node, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, path)
            with os.fdopen(fd, "wb") as fh:
                if not node.exists:
                    self._adopt_fd(fh.fileno(), is_dir=False)
                fh.write(data)
            return node.rel

    def _open_file(self, node: Node, flags: int, path: str) -> int:
        try:
            fd = os.open(node.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=node.dir_fd)
        except IsADirectoryError:
            raise ToolRefused(f"'{path}' is a directory") from None
        except OSError as exc:
            # ELOOP: became a symlink after the walk checked it; never followed.
            raise ToolRefused(f"'{path}' cannot be opened ({exc.strerror})") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ToolRefused(f"'{path}' is not a regular file")
        os.set_blocking(fd, True)
        return fd

    @contextmanager
    def folder(self, path):
        """An open descriptor of the folder ``path`` names (read-only)."""
        with self.node(path) as node:
            if node.name is None:
                fd = os.dup(node.dir_fd)
            elif not node.exists:
                raise ToolRefused(f"'{path}' does not exist")
            else:
                try:
                    fd = os.open(node.name, _DIR_FLAGS, dir_fd=node.dir_fd)
                except OSError:
                    raise ToolRefused(f"'{path}' is not a directory") from None
            try:
                yield fd, node.rel
            finally:
                os.close(fd)

    def kind(self, path) -> str:
        """'dir', 'file', 'other' or 'missing' (after following in-workspace links)."""
        with self.node(path) as node:
            if node.name is None:
                return "dir"
            if not node.exists:
                return "missing"
            try:
                st = os.stat(node.name, dir_fd=node.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                # the agent's own process may remove it between the walk and the stat
                return "missing"
            return "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"

    # ------------------------------------------------------------ ownership

    def _adopt(self, name: str, dir_fd: int, is_dir: bool) -> None:
        fd = os.open(name, (_DIR_FLAGS if is_dir else os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), dir_fd=dir_fd)
        try:
            self._adopt_fd(fd, is_dir)
        finally:
            os.close(fd)

    def _adopt_fd(self, fd: int, is_dir: bool) -> None:
        """New files belong to whoever the agent's commands run as (see class doc)."""
        if os.geteuid() != 0:
            return
        if self.owner[0] != 0:
            os.fchown(fd, *self.owner)
            os.fchmod(fd, 0o755 if is_dir else 0o644)
        else:
            os.fchmod(fd, 0o777 if is_dir else 0o666)

    # ------------------------------------------------------------ walking

    def walk_files(self, path=".", cut: list | None = None):
        """Yield ``(rel, dir_fd, name, stat)`` for every entry under ``path`` (sorted,
        never following a symlink, skipping .git and __pycache__ folders). Folders deeper
        than ``SNAPSHOT_MAX_DEPTH`` are yielded but not entered; their paths go to ``cut``."""
        with self.folder(path) as (fd, rel):
            yield from _walk(fd, "" if rel == "." else rel, cut)

    def snapshot(self, cut: list | None = None) -> dict:
        """path -> fingerprint for the workspace, excluding .git and __pycache__.

        Files: (size, mtime_ns, mode, sha256 if small); symlinks: their target;
        directories: presence only (their mtime moves when ignored caches appear).
        Folders too deep to enter and entries past ``SNAPSHOT_MAX_ENTRIES`` are not
        fingerprinted; what was cut is appended to ``cut``.
        """
        out: dict = {}
        for rel, dir_fd, name, st in self.walk_files(".", cut):
            if len(out) >= SNAPSHOT_MAX_ENTRIES:
                if cut is not None:
                    cut.append(f"[entries past {SNAPSHOT_MAX_ENTRIES}]")
                break
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("d",)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    out[rel] = ("l", os.readlink(name, dir_fd=dir_fd))
                except OSError:
                    out[rel] = ("l", "?")
            else:
                digest = None
                if stat.S_ISREG(st.st_mode) and st.st_size <= SNAPSHOT_HASH_MAX:
                    digest = _digest(name, dir_fd)
                out[rel] = ("f", st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode), digest)
        return out


def _listing(dir_fd: int):
    try:
        return iter(sorted(os.listdir(dir_fd)))
    except OSError:
        return iter(())


def _walk(dir_fd: int, prefix: str, cut: list | None = None):
    """Depth first, without recursion: one (descriptor, prefix, names) frame per level."""
    stack: list[tuple[int | None, int, str, object]] = [(None, dir_fd, prefix, _listing(dir_fd))]
    try:
        while stack:
            _, fd, pre, names = stack[-1]
            name = next(names, None)  # type: ignore[call-overload]
            if name is None:
                owned = stack.pop()[0]
                if owned is not None:
                    os.close(owned)
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            rel = f"{pre}/{name}" if pre else name
            if not stat.S_ISDIR(st.st_mode):
                yield rel, fd, name, st
                continue
            if name in SNAPSHOT_SKIP:
                continue
            yield rel, fd, name, st
            if len(stack) > SNAPSHOT_MAX_DEPTH:
                if cut is not None:
                    cut.append(rel)
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # swapped for a symlink since the stat: not followed
            stack.append((sub, sub, rel, _listing(sub)))
    finally:
        for owned, *_ in stack:
            if owned is not None:
                os.close(owned)


def _digest(name: str, dir_fd: int) -> str:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return "unreadable"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "unreadable"
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 16):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def diff_snapshots(before: dict, after: dict) -> list[str]:
    changed = [p for p in after if before.get(p) != after[p]]
    changed += [p for p in before if p not in after]
    return sorted(changed)
