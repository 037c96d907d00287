"""Turn snapshots: the workspace of an agent with its own tools, between its model calls.

An agent that runs its own tools (a ``venvs.toml`` ``kind = "cli"`` entry) has no harness tool
layer to measure what each call changed, and the verifier's diff shows only the end: an edit
undone before the agent exits is not in it. The harness takes a content snapshot of the
workspace (no agent code runs; the safe reader of :mod:`claimgrid.verify.workspace`):

* ``start``, after the workspace is materialised and before the agent starts;
* at every model request of the run the gateway receives (``Gateway.register``'s
  ``on_request``), before it is answered: the agent is waiting for that answer, so the tool
  calls of its previous answer have run and sent their results;
* ``exit``, after the agent process has exited (:meth:`TurnSnapshots.finish`: the last one; a
  request the agent left in flight takes none after it).

A snapshot maps every path the verifier's diff records (``scan_workspace``: not ``.git``, not
interpreter caches; a symlink as its target text) to its size and SHA-256. A file whose size,
modification and change times, inode and mode are those of the previous snapshot is not read
again (the change time cannot be set back by the agent). The agent is alive while a snapshot
is taken, so it is walked and read by descriptors, never by path
(:func:`claimgrid.verify.workspace.walk_at`): a folder swapped for a symlink out of the
workspace mid-walk fails that snapshot ("changed while it was read") and nothing outside is
listed or read. A snapshot over a cap
(``caps.MAX_WORKSPACE_*``, ``caps.TURN_SNAPSHOT_MAX_READ_BYTES``) or that fails to read is not
taken: it is recorded with its reason, never guessed.

:meth:`TurnSnapshots.events` gives one ``source: verifier``, ``kind: turn_changes`` event per
interval between two consecutive snapshots (docs/task-authors.md, "source verifier")::

    {"source": "verifier", "kind": "turn_changes", "after_call": 2, "before_call": 3, "t": 0.41,
     "changed": [{"path": "src/calculator.py", "change": "modified"}], "changed_n": 1,
     "reason": null}

``after_call`` is the call index whose answer's tool calls ran in the interval (null: before
the first model call); ``before_call`` the request at which the later snapshot was taken
(null: the agent's exit); ``t`` seconds from the start snapshot to the later one; ``change``
``added`` / ``modified`` / ``removed``; ``changed`` lists at most ``caps.TURN_CHANGES_MAX_PATHS``
paths (``changed_cut: true`` past it) and ``changed_n`` counts them all. When either snapshot
was not taken, ``changed`` and ``changed_n`` are null and ``reason`` says why.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from claimgrid import caps
from claimgrid.verify.workspace import LimitExceeded, read_at, walk_at

# path -> (size, sha256 hex)
Files = dict[bytes, tuple[int, str]]


@dataclass(frozen=True)
class Snapshot:
    """One snapshot: the request it was taken at (``call``; None for start and exit), seconds
    since the start snapshot, and the files, or None with the ``reason`` it was not taken."""

    call: int | None
    t: float
    files: Files | None
    reason: str | None = None


def _key(st: os.stat_result) -> tuple:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode)


class TurnSnapshots:
    """The snapshots of one run, in the order they were taken (module docstring). Thread-safe:
    the gateway calls :meth:`take` from its worker threads, one run's snapshots one at a time."""

    def __init__(self, workspace: Path, max_read_bytes: int | None = None) -> None:
        self.workspace = Path(workspace)
        self.max_read_bytes = caps.TURN_SNAPSHOT_MAX_READ_BYTES if max_read_bytes is None else max_read_bytes
        self.snapshots: list[Snapshot] = []
        self._known: dict[bytes, tuple[tuple, str]] = {}  # path -> (stat key, sha256) last read
        self._lock = threading.Lock()
        self._t0: float | None = None
        self._closed = False  # after the exit snapshot: a late request's hook takes none

    def take(self, call: int | None = None) -> None:
        """Take one snapshot (``call``: the request's call index; None: start or exit). Never
        raises for what is in the workspace: a failure is a recorded snapshot with its reason."""
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            if self._t0 is None:
                self._t0 = now
            t = round(now - self._t0, 4)
            try:
                files, reason = self._read(), None
            except LimitExceeded as exc:
                files, reason = None, str(exc)
            except OSError as exc:  # a file gone or swapped while it was read
                files, reason = None, f"snapshot failed: {exc.strerror or exc}"
            self.snapshots.append(Snapshot(call, t, files, reason))

    def finish(self) -> None:
        """The exit snapshot, the last: a request still being handled when the agent was killed
        takes none after it."""
        self.take()
        with self._lock:
            self._closed = True

    def _read(self) -> Files:
        # By descriptors (walk_at, read_at): the agent is alive and may swap a folder for a
        # symlink out of the workspace at any moment; nothing is resolved by path, so nothing
        # outside is ever listed, stat-ed or read (the snapshot fails instead). A changed file
        # is read as it is met; past the read cap nothing more is read, the walk goes on to
        # count what the snapshot would have read, and the snapshot is not taken.
        files: Files = {}
        known: dict[bytes, tuple[tuple, str]] = {}
        to_read = 0
        for rel, st, dir_fd, name in walk_at(self.workspace):
            digest = self._cached(rel, st)
            if digest is None:
                if stat.S_ISREG(st.st_mode):
                    to_read += st.st_size
                if to_read > self.max_read_bytes:
                    continue
                digest = hashlib.sha256(read_at(dir_fd, name, rel, st)).hexdigest()
            known[rel] = (_key(st), digest)
            files[rel] = (st.st_size, digest)
        if to_read > self.max_read_bytes:
            raise LimitExceeded(
                f"snapshot would read {to_read} changed bytes, over {self.max_read_bytes} "
                "(cap TURN_SNAPSHOT_MAX_READ_BYTES)"
            )
        self._known = known
        return files

    def _cached(self, rel: bytes, st: os.stat_result) -> str | None:
        seen = self._known.get(rel)
        return seen[1] if seen is not None and seen[0] == _key(st) else None

    def events(self) -> list[dict]:
        """One ``turn_changes`` event per interval between consecutive snapshots (module docstring)."""
        with self._lock:
            snaps = list(self.snapshots)
        out = []
        for a, b in zip(snaps, snaps[1:], strict=False):
            event: dict = {
                "source": "verifier",
                "kind": "turn_changes",
                "after_call": a.call,
                "before_call": b.call,
                "t": b.t,
            }
            if a.files is None or b.files is None:
                reason = a.reason if a.files is None else b.reason
                event.update(changed=None, changed_n=None, reason=reason)
            else:
                changes = changed_paths(a.files, b.files)
                event.update(changed=changes[: caps.TURN_CHANGES_MAX_PATHS], changed_n=len(changes), reason=None)
                if len(changes) > caps.TURN_CHANGES_MAX_PATHS:
                    event["changed_cut"] = True
            out.append(event)
        return out


def changed_paths(before: Files, after: Files) -> list[dict]:
    """``[{"path", "change"}]`` from one snapshot to the next, by path: added, modified (size or
    content), removed."""
    out = []
    for rel in sorted(before.keys() | after.keys()):
        if rel not in before:
            change = "added"
        elif rel not in after:
            change = "removed"
        elif before[rel] != after[rel]:
            change = "modified"
        else:
            continue
        out.append({"path": os.fsdecode(rel), "change": change})
    return out
