"""A content-addressed cache of the verifier's test runs.

Most runs of a grid end with byte-identical workspaces (the same reference model on the
same task gives the same final tree under many conditions), and re-running the task's
tests on each costs an interpreter start and a sandbox. The cache lets a run whose final
workspace is identical, *as the verifier itself read it*, to one already tested reuse that
test result, and says so in its evidence.

**The key** (:func:`cache_key`, sha256 over canonical JSON) is everything the test run's
result depends on that the harness controls or reads itself:

* ``recipe``: :data:`RECIPE`, bumped whenever :func:`claimgrid.verify.verifier.run_tests` changes
  what a test run sees; and the test run's environment variables;
* the test command (argv after ``{python}`` is substituted) and the timeout;
* the interpreter (:meth:`VerifyCache.interpreter`): the path given, its realpath, the
  binary's device/inode/size/mtime, the venv's ``pyvenv.cfg`` (sha256) and claimgrid stamp
  (``claimgrid.inputs.venvs``: pyproject, lock, Python version, sync flags), and the folders the
  sandbox binds for it;
* the guard's facts (``Guard.facts()``: on or off, bwrap binary and version, uid model,
  resource limits): a result obtained with the guard off never serves a guarded run;
* what the test run sees of its own run (``claimgrid.sandbox.sameview.seen_by_test_run``):
  the uid it runs as and the overlay paths ``/proc/self/mountinfo`` shows, made the same in
  every run where the harness can (root: a fixed uid and fixed mount points; guarded, the
  report and spec descriptors at fixed numbers: ``verifier.SEEN_REPORT_FD``); a guarded test
  run whose paths cannot be fixed is not cacheable;
* the workspace: the git tree id the verifier built from its own ``O_NOFOLLOW`` reading
  (every recorded file's content, exec bit, every symlink's target, never followed), plus
  :func:`workspace_extras`: what the test run sees that a git tree does not record: every
  entry's full mode bits, owner and group (folders too, so an empty folder or one mode bit
  differs), and the top-level ``.git`` folder's whole content (its index without the
  stat data it caches: :func:`index_content`). Interpreter caches are left
  out because the test run sees them empty. A workspace holding anything the diff cannot
  name (a fifo, socket or device; a path with a nested ``.git``) is not cacheable.

Nothing the agent says is read, and nothing is followed through a symlink.

**The assumption** (why a task can opt out with ``[verify] deterministic = false``): a test
run's result is a function of the key. Not in the key: the clock, randomness, timing
against the timeout, file times (mtime, atime), inode numbers and extended attributes of
workspace files, the kernel's mount ids and device numbers, and, with the guard off (the
copy's folder and the descriptor numbers included), anything on the machine outside the workspace
(guarded, the sandbox shows only system folders, the interpreter, an empty ``/tmp`` and
the workspace). A tree whose tests read any of these gets the result of the first run
with that tree. What an agent controls among them (file times, xattrs) it could equally
have set as that first run did, so a hit never hands a run a result its own tree's
content, modes and interpreter could not have earned.

**What is stored**: only completed test runs (an exit code >= 0, not timed out, not a
failure to start, not a sandbox set-up error: output starting ``bwrap:``, ``prlimit:`` or
``setpriv:``). A timeout, a cap, a harness error is recomputed by every run.

**Scope**: one cache per node (:class:`claimgrid.execute.node.Node`), in memory, bounded
(:data:`MAX_ENTRIES`, least recently used out), shared by the node's run threads; runs
with the same key in flight at once test once (the others wait for that result). On the
Ray backend every node's cache also asks one :class:`SharedResults` of the grid (kept in
one process beside the driver) before it tests, so a key is tested once per grid however
many nodes see it, as on the local backend; a node lost while it tests a key hands that
key to the next node that asks. ``--resume`` starts empty; ``--no-verify-cache`` turns it
off.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from claimgrid.inputs.venvs import STAMP_NAME
from claimgrid.sandbox.guard import python_roots
from claimgrid.verify.workspace import CACHE_DIRS, LimitExceeded, read_nofollow

# Bump when claimgrid.verify.verifier.run_tests changes what a test run sees (binds, env, hiding).
RECIPE = 4  # 4: the same uid and overlay paths in every test run (claimgrid.sandbox.sameview)
MAX_ENTRIES = 4096  # test results kept per node; each holds at most the output tail (4,000 chars)
# How long a node waits for another node's test run of the same key before it tests the key
# itself: a bound for an owner that hangs, not a deadline (a lost owner is released at once).
SHARED_WAIT_S = 300.0
# Output a failed sandbox set-up starts with (bwrap, prlimit, setpriv): a harness error, not a result.
SETUP_ERRORS = ("bwrap:", "prlimit:", "setpriv:")
# The fields of a test-run event that are its result (copied into a hit's event).
RESULT_FIELDS = (
    "command",
    "exit_code",
    "passed",
    "timed_out",
    "guard",
    "output_tail",
    "duration_s",
    "integrity",
    "restored",
    "changed_tests",
    "tampered",
    "subverted",
    "impossible",
)


def workspace_extras(
    workspace: Path, seen: list[tuple[bytes, os.stat_result]], sandbox_uid: int | None = None
) -> str | None:
    """sha256 of what the test run sees of the workspace beyond its git tree, from the
    verifier's own walk (``seen``: every entry, ``lstat``, see ``scan_workspace``):

    * each entry's relative path, full ``st_mode`` (type and all permission bits), uid, gid;
      folders included; entries inside an interpreter-cache folder left out (the test run
      sees those folders empty: ``verifier.cache_dirs``);
    * the top-level ``.git``'s every file content (read ``O_NOFOLLOW``; the index without its
      cached stat data, :func:`index_content`) and link target;
    * the workspace folder's own mode and owner.

    ``sandbox_uid``: the run's own sandbox uid (``claimgrid.sandbox.slots``), named as "the
    sandbox user" so two runs' identical workspaces share a key whichever uid each leased.

    None when the workspace holds an entry the key cannot name (not a folder, file or
    symlink) or a ``.git`` file cannot be read: such a workspace is not cacheable.
    """
    root = os.fsencode(workspace)
    h = hashlib.sha256()

    def owner(st: os.stat_result) -> bytes:
        uid = b"sandbox" if sandbox_uid is not None and st.st_uid == sandbox_uid else b"%d" % st.st_uid
        gid = b"sandbox" if sandbox_uid is not None and st.st_gid == sandbox_uid else b"%d" % st.st_gid
        return uid + b" " + gid

    st = os.lstat(root)
    h.update(b"root %o %s\0" % (st.st_mode, owner(st)))
    for rel, st in sorted(seen, key=lambda item: item[0]):
        in_git = rel == b".git" or rel.startswith(b".git/")
        if not in_git and any(part in CACHE_DIRS for part in rel.split(b"/")[:-1]):
            continue
        kind = stat.S_IFMT(st.st_mode)
        if kind not in (stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK):
            return None
        h.update(rel + b"\0%o %s\0" % (st.st_mode, owner(st)))
        if in_git and kind != stat.S_IFDIR:
            try:
                data = read_nofollow(root, rel, st)
            except (OSError, LimitExceeded):
                return None
            h.update(hashlib.sha256(index_content(data) if rel == b".git/index" else data).digest())
    return h.hexdigest()


_INDEX_EXTENSIONS = {b"TREE", b"REUC", b"link", b"sdir", b"EOIE", b"IEOT"}  # none holds file stat data


def index_content(data: bytes) -> bytes:
    """A git index (``.git/index``) without what it caches of the files' stat data.

    Every entry keeps its mode, owner, size, object id, flags and path; its ctime, mtime,
    device and inode are zeroed, and the trailing checksum (over those) dropped. These are
    what the module doc leaves out of the key (file times, inode numbers), and they differ
    between two builds of the same fixture (another node, another second), so without this
    no two nodes' workspaces would share a key. An index this cannot read (version 4, an
    extension that may hold stat data, a truncated file) is returned whole: such a
    workspace keeps a key of its own, as before."""
    try:
        if data[:4] != b"DIRC" or int.from_bytes(data[4:8], "big") not in (2, 3):
            return data
        count, pos, end = int.from_bytes(data[8:12], "big"), 12, len(data) - 20
        out = bytearray(data[:12])
        for _ in range(count):
            flags = int.from_bytes(data[pos + 60 : pos + 62], "big")
            fixed = 62 + (2 if flags & 0x4000 else 0)
            name_end = data.index(b"\0", pos + fixed)
            size = (name_end - pos + 8) // 8 * 8  # the NUL padding that ends an entry
            if pos + size > end:
                return data
            out += bytes(24) + data[pos + 24 : pos + size]  # ctime, mtime, dev, ino zeroed
            pos += size
        while pos < end:
            sig, length = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "big")
            if sig not in _INDEX_EXTENSIONS or pos + 8 + length > end:
                return data
            out += data[pos : pos + 8 + length]
            pos += 8 + length
        return bytes(out) if pos == end else data
    except (IndexError, ValueError):
        return data


def interpreter_identity(python: str) -> dict:
    """What identifies the interpreter a test command runs (see module doc)."""
    real = os.path.realpath(python)
    st = os.stat(real)
    venv = Path(python).parent.parent
    ident: dict = {
        "path": python,
        "realpath": real,
        "binary": [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns],
        "roots": python_roots(python),
    }
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        ident["pyvenv_cfg"] = hashlib.sha256(cfg.read_bytes()).hexdigest()
    stamp = venv / STAMP_NAME
    if stamp.is_file():
        ident["stamp"] = stamp.read_text().strip()
    return ident


def cache_key(
    *, command: list[str], interpreter: dict, guard: dict, timeout_s: float, env: dict, tree: str, extras: str
) -> str:
    """The cache key (64 hex): sha256 of every input named, in canonical JSON."""
    data = {
        "recipe": RECIPE,
        "command": list(command),
        "interpreter": interpreter,
        "guard": guard,
        "timeout_s": float(timeout_s),
        "env": env,
        "tree": tree,
        "extras": extras,
    }
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def cacheable(event: dict) -> bool:
    """Only a test run that completed: an exit code >= 0 (not killed by a signal), not timed
    out, no harness reason, not a sandbox that failed to set up."""
    code = event.get("exit_code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and code >= 0
        and not event.get("timed_out")
        and event.get("reason") is None
        and isinstance(event.get("passed"), bool)
        and not (event.get("output_tail") or "").lstrip().startswith(SETUP_ERRORS)
    )


class Shared(Protocol):
    """What a node's cache asks of the grid's shared results (a :class:`SharedResults`, or a
    client of one in another process). Either call may fail only by answering "compute" /
    doing nothing: a lost shared store costs test runs, never a result."""

    def claim(self, key: str, run_id: str) -> tuple[str, dict | None, str | None]: ...

    def settle(self, key: str, result: dict | None, run_id: str) -> None: ...


class SharedResults:
    """The test results of one grid, shared by all its nodes: key -> (result, origin run).

    Thread-safe; one instance per grid, in one process (the Ray backend runs it as an actor
    beside the driver and hands each node a client). ``claim`` answers ``("hit", result,
    origin)`` when the key was tested, else ``("compute", None, None)``: the first to ask
    owns the key and tests it, one asking while the owner tests waits for its ``settle``
    (up to ``wait_s``) and gets the hit, or computes itself when the owner's result was not
    cacheable (as a node's own waiters do). ``forget_node`` releases a lost node's keys."""

    def __init__(self, max_entries: int = MAX_ENTRIES * 4, wait_s: float = SHARED_WAIT_S):
        self.max_entries, self.wait_s = max_entries, wait_s
        self._entries: OrderedDict[str, tuple[dict, str]] = OrderedDict()
        self._inflight: dict[str, tuple[threading.Event, str]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.tests: Counter[str] = Counter()  # key -> test runs settled for it (any node)

    def _found(self, key: str) -> tuple[str, dict | None, str | None] | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return ("hit", found[0], found[1])

    def claim(self, key: str, run_id: str, node: str = "") -> tuple[str, dict | None, str | None]:
        with self._lock:
            found = self._found(key)
            if found is not None:
                return found
            flight = self._inflight.get(key)
            if flight is None:
                self._inflight[key] = (threading.Event(), node)
                return ("compute", None, None)
        flight[0].wait(self.wait_s)
        with self._lock:
            return self._found(key) or ("compute", None, None)

    def settle(self, key: str, result: dict | None, run_id: str, node: str = "") -> None:
        """A test run of ``key`` ended: ``result`` (None: not cacheable) from ``run_id``."""
        with self._lock:
            self.tests[key] += 1
            if result is not None and key not in self._entries:
                self._entries[key] = ({k: result[k] for k in RESULT_FIELDS if k in result}, run_id)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
            flight = self._inflight.get(key)
            if flight is not None and (result is not None or flight[1] == node):
                del self._inflight[key]
                flight[0].set()

    def forget_node(self, node: str) -> int:
        """The keys ``node`` owned and will never settle (it was lost): their waiters compute."""
        with self._lock:
            lost = [key for key, (_, owner) in self._inflight.items() if owner == node]
            for key in lost:
                self._inflight.pop(key)[0].set()
        return len(lost)

    def facts(self) -> dict:
        """Distinct keys tested, test runs in all, hits served (the grid meta's ``verify_cache``)."""
        with self._lock:
            return {"shared": True, "keys": len(self.tests), "test_runs": sum(self.tests.values()), "hits": self.hits}


class VerifyCache:
    """One node's cache: key -> (test-run event, the run whose test run produced it).

    Thread-safe. :meth:`run` is the only entry: it returns the event to record, marked
    ``cache: "hit"`` (``cached: true``, ``verified_by``) or ``"miss"`` (``cached: false``).
    ``shared``: the grid's results across nodes (:class:`Shared`), asked before a test run
    and told its result; None: this node's own results only.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, shared: Shared | None = None):
        self.max_entries = max_entries
        self.shared = shared
        self._entries: OrderedDict[str, tuple[dict, str]] = OrderedDict()
        self._inflight: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._interpreters: dict[str, dict] = {}
        self.hits = self.misses = 0

    def interpreter(self, python: str) -> dict:
        """:func:`interpreter_identity`, computed once per interpreter per node."""
        with self._lock:
            known = self._interpreters.get(python)
        if known is None:
            known = interpreter_identity(python)
            with self._lock:
                self._interpreters[python] = known
        return known

    def _take(self, key: str) -> tuple[dict, str] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return found

    def _put(self, key: str, event: dict, run_id: str) -> None:
        with self._lock:
            if key not in self._entries:
                self._entries[key] = ({k: event[k] for k in RESULT_FIELDS if k in event}, run_id)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)

    @staticmethod
    def _hit(key: str, found: tuple[dict, str]) -> dict:
        result, origin = found
        return {
            "source": "verifier",
            "kind": "tests",
            **result,
            "cache": "hit",
            "cached": True,
            "verified_by": origin,
            "detail": f"verified by the result of run {origin}",
            "cache_key": key,
        }

    def run(self, key: str, run_id: str, compute: Callable[[], dict]) -> dict:
        """The test-run event for ``run_id``: a stored result for ``key``, or ``compute()``'s
        (stored when :func:`cacheable`). Runs with one key in flight at once compute once."""
        found = self._take(key)
        if found is not None:
            return self._hit(key, found)
        with self._lock:
            flight = self._inflight.get(key)
            owner = flight is None
            if owner:
                flight = self._inflight[key] = threading.Event()
        assert flight is not None  # ours or the owner's, set under the lock above
        if not owner:
            flight.wait()
            found = self._take(key)
            if found is not None:
                return self._hit(key, found)
            # the first result was not cacheable (a timeout, a harness error): test this one
        try:
            if self.shared is not None:
                verdict, result, origin = self.shared.claim(key, run_id)
                if verdict == "hit" and result is not None and origin is not None:
                    self._put(key, result, origin)
                    with self._lock:
                        self.hits += 1
                    return self._hit(key, (result, origin))
            event: dict | None = None
            try:
                event = compute()
            finally:
                keep = event is not None and cacheable(event)
                if self.shared is not None:  # a test run that raised settles too: no node waits on it
                    self.shared.settle(key, event if keep else None, run_id)
            assert event is not None  # compute() returned (a raise left above)
            with self._lock:
                self.misses += 1
            if keep:
                self._put(key, event, run_id)
        finally:
            if owner:
                with self._lock:
                    self._inflight.pop(key, None)
                flight.set()
        return {**event, "cache": "miss", "cached": False, "cache_key": key}
