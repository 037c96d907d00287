"""A node: everything one machine needs to run cells — its own gateway on loopback, its own
warm parents, its own work folder, its own verify cache (``claimgrid.verify.cache``, in memory,
empty at start; on the Ray backend backed by the grid's shared results) — behind ``run(cell)``.

The local backend opens one node in the driver; the Ray backend opens one per Ray node
inside an actor (``claimgrid/execute/ray.py``). Either way the node never writes the
ledger: ``run`` returns a :class:`claimgrid.execute.spec.CellResult` (the record and the
evidence files), and the driver, the single
writer, stores them. Run tokens and the gateway never leave the node.

The work folder (``<parent>/claimgrid-node-*``, the parent from :func:`work_parent`: a
tmpfs when one is there to use, else the temporary folder) holds an ``owner`` file the node keeps an
``flock`` on for its whole life; the kernel drops it however the node ends. The node's
watchdog removes the folder when the node's process dies, but a node killed with its
watchdog (``kill -9`` of every process of a Ray node, a container stopped) leaves it, so
every node start, and the Ray driver at a grid's end, removes the folders of this user
whose owner lock nobody holds (:func:`sweep_dead`). A live node's folder, whichever grid it
serves, is never touched: its lock is held.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from claimgrid import caps
from claimgrid.anybytes import remove_tree
from claimgrid.execute.cells import Cell
from claimgrid.execute.spec import CellResult, GridInputs, GridSpec, Replay
from claimgrid.store.record import RunNode, RunRecord

if TYPE_CHECKING:
    from claimgrid.gateway import Gateway
    from claimgrid.verify.cache import Shared


@dataclass(frozen=True)
class NodeSettings:
    """What a node needs to run cells of one grid: plain, picklable values (paths, not objects).

    ``spec`` names the data folders, the frameworks, the per-run limits, the guard mode, the
    policy files, the retry policy and the verify cache; ``connections`` is the gateway's
    ``(default, {provider: n})`` limit; ``replay`` serves a ledger's recordings (grid.py replay)."""

    spec: GridSpec
    framework_versions: dict = field(default_factory=dict)
    connections: tuple | None = None
    replay: Replay | None = None
    claim_judge: str | None = None  # --claim-judge MODEL (claimgrid.classify.judge)


class CollectingStore:
    """Stands in for the run store inside a node: keeps what ``run_cell`` would write."""

    def __init__(self):
        self.evidence: dict[str, dict] = {}
        self.records: dict[str, RunRecord] = {}

    def write_evidence(self, run_id: str, files: dict) -> None:
        self.evidence[run_id] = files

    def append(self, record: RunRecord) -> None:
        self.records[record.run_id] = record

    def take(self, run_id: str) -> tuple[RunRecord | None, dict | None]:
        return self.records.pop(run_id, None), self.evidence.pop(run_id, None)


WORK_PREFIX = "claimgrid-node-"
OWNER_FILE = "owner"
# A memory file system for the per-run churn (every run copies a workspace, writes scratch and
# removes both): on a disk file system each file's creation and removal is journalled.
WORK_TMPFS = "/dev/shm"
MOUNTS = "/proc/self/mounts"


def work_parent(tmpfs: str = WORK_TMPFS, mounts: str = MOUNTS) -> str:
    """Where a node's work folder goes: ``tmpfs`` when ``TMPDIR`` is not set (a user's or a
    test session's choice is kept), it is a mounted tmpfs without ``noexec`` (the agent runs
    what it writes in its workspace), writable, and has :data:`caps.WORK_TMPFS_MIN_FREE_BYTES`
    free; else the temporary folder (``tempfile.gettempdir()``), as before."""
    fallback = tempfile.gettempdir()
    if os.environ.get("TMPDIR"):
        return fallback
    try:
        with open(mounts) as fh:
            table = [line.split() for line in fh]
        options = next(f[3].split(",") for f in reversed(table) if len(f) >= 4 and f[1] == tmpfs)
        fs_type = next(f[2] for f in reversed(table) if len(f) >= 4 and f[1] == tmpfs)
        st = os.statvfs(tmpfs)
    except (OSError, StopIteration):
        return fallback
    if fs_type != "tmpfs" or "noexec" in options or "ro" in options or not os.access(tmpfs, os.W_OK | os.X_OK):
        return fallback
    if st.f_bavail * st.f_frsize < caps.WORK_TMPFS_MIN_FREE_BYTES:
        return fallback
    return tmpfs


def make_work_dir(parent: str | None = None) -> tuple[Path, int]:
    """A new work folder (in ``parent``; None: :func:`work_parent`) and the descriptor holding
    its owner lock (close it only after the folder is removed). The lock is taken on a
    temporary name and then renamed into place, so a sweeper never sees an ``owner`` file that
    is not locked yet."""
    path = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=parent or work_parent()))
    pending = path / (OWNER_FILE + ".new")
    fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"pid {os.getpid()}\n".encode())
        os.rename(pending, path / OWNER_FILE)
    except BaseException:
        os.close(fd)
        remove_tree(path)
        raise
    return path, fd


def sweep_dead(parent: str | None = None) -> list[str]:
    """Remove the work folders in ``parent`` (default: the temporary folder and the tmpfs of
    :func:`work_parent`) of nodes that are gone: named ``claimgrid-node-*``, a folder (not a
    link) of this user, holding an ``owner`` file whose lock can be taken. A folder without an
    owner file (an older version's, or one being made) is left alone. Returns the folders removed."""
    parents = [parent] if parent else list(dict.fromkeys([tempfile.gettempdir(), work_parent()]))
    removed: list[str] = []
    entries = []
    for folder in parents:
        try:
            entries += list(os.scandir(folder))
        except OSError:
            continue
    for entry in entries:
        try:
            if not entry.name.startswith(WORK_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, OWNER_FILE), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: a live node's folder
            if remove_tree(entry.path):
                removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


class Node:
    """One node's gateway, launcher and grid context. ``close`` stops them (idempotent)."""

    def __init__(
        self,
        settings: NodeSettings,
        inputs: GridInputs | None = None,
        cpus: int | None = None,
        shared_results: Shared | None = None,
        where: RunNode | None = None,
    ):
        """``inputs``: the driver's loaded data and guard (the local backend); None on a
        remote node, which loads its own from the spec's data folders and detects its guard.
        ``cpus``: the node's own CPUs (a Ray node's resources), how many warm parents preload
        at once (default: this machine's). ``shared_results``: the grid's verify results
        across nodes (claimgrid.verify.cache.Shared); None: this node's own. ``where``: the
        node every record of it names (None: this machine, ``local``)."""
        from claimgrid.execute.runner import GridContext
        from claimgrid.gateway import Gateway
        from claimgrid.launch import Launcher
        from claimgrid.sandbox.guard import detect
        from claimgrid.verify.cache import VerifyCache

        self.settings = settings
        spec = settings.spec
        inputs = inputs if inputs is not None else _load_inputs(spec)
        self.guard = inputs.guard if inputs.guard is not None else detect(spec.guard_mode)
        self.sink = CollectingStore()
        self.swept = sweep_dead()  # folders of nodes killed with their watchdog on this machine
        self.work_dir, self._owner_fd = make_work_dir()
        self.gateway: Gateway | None = None
        self.gateway_cpu_s: float | None = None  # set by close(): the gateway thread's CPU
        self._socket_dir: str | None = None  # the gateway socket's own folder, when the work folder's path is too long
        self._closed = False
        try:
            self.launcher = Launcher(inputs.entries, isolation=spec.isolation)
        except BaseException:
            remove_tree(self.work_dir)
            os.close(self._owner_fd)
            raise
        self.launcher.watch_dir(self.work_dir)  # removed by the watchdog if this process is killed
        self.prewarm_parallel = max(1, cpus or os.cpu_count() or 1)
        # preloads start now, a few at a time (the node's CPUs), overlapping the first runs; a
        # framework whose venv is still building is preloaded once it is ready (prewarm_more)
        builds = inputs.builds
        ready = None if builds is None else [n for n in inputs.entries if builds.state(n) == "ready"]
        self.launcher.prewarm(self.prewarm_parallel, ready)
        try:
            from claimgrid.gateway.connections import Connections
            from claimgrid.gateway.recorded import ReplaySource

            replay = settings.replay
            self.connections = Connections(*settings.connections) if settings.connections else Connections()
            self.gateway = Gateway(
                retry=spec.provider_retry.policy(),
                replay=ReplaySource(Path(replay.folder)) if replay else None,
                connections=self.connections,
                # A guarded coding agent's one address (claimgrid.launch.confine.agent_sandbox):
                # in the node's own folder, so the watchdog's removal of it covers the socket.
                unix_socket=self._gateway_socket(),
            )
            self.gateway.start()
            self.ctx = GridContext(
                tasks=inputs.tasks,
                content=inputs.content,
                swap=inputs.swap,
                gateway=self.gateway,
                launcher=self.launcher,
                store=self.sink,
                work_dir=self.work_dir,
                timeout_s=spec.timeout_s,
                limits=dict(spec.limits),
                max_model_calls=spec.max_model_calls,
                isolation=spec.isolation,
                framework_versions=settings.framework_versions,
                guard=self.guard,
                delegations=dict(replay.delegations) if replay else {},
                verify_cache=VerifyCache(shared=shared_results) if spec.verify_cache else None,
                boxes=self.guard.limits.boxes(self.guard.as_root) if self.guard.enabled else None,
                model_call_timeouts=dict(inputs.call_deadlines),
                served_models=dict(inputs.served_models),
                node=where or RunNode(backend="local"),
                claim_judge=settings.claim_judge,
            )
        except BaseException:
            self.close()
            raise

    def _gateway_socket(self) -> str:
        """The gateway's Unix socket: in the node's own 0700 work folder, or, where that path
        is too long to bind (a deep temporary folder), in a new 0700 folder under /tmp that
        the watchdog and :meth:`close` remove."""
        from claimgrid.caps import UNIX_SOCKET_PATH_MAX

        path = str(self.work_dir / "gateway.sock")
        if len(path) > UNIX_SOCKET_PATH_MAX:
            self._socket_dir = tempfile.mkdtemp(prefix="cg-gw-", dir="/tmp")
            self.launcher.watch_dir(Path(self._socket_dir))
            path = os.path.join(self._socket_dir, "gateway.sock")
        return path

    def prepare(self, cells: list[Cell]) -> None:
        """Build the templates these cells need once, before threads share them."""
        for task, content in sorted({(c.task, c.content) for c in cells}):
            self.ctx.template(self.ctx.tasks[task], self.ctx.content[content])

    def run(self, cell: Cell) -> CellResult:
        """The cell's record and evidence files (DONE), or a harness bug in this cell
        (HARNESS_ERROR: reported by the driver; the cell stays missing and ``--resume`` re-runs
        it), or INTERRUPTED when Ctrl-C killed the run (nothing of it is stored)."""
        from claimgrid.execute.runner import run_cell
        from claimgrid.launch import RunInterrupted

        try:
            run_cell(cell, self.ctx)
        except RunInterrupted:
            self.sink.take(cell.run_id)
            return CellResult.interrupted()
        except Exception as exc:  # noqa: BLE001 - one cell's harness bug must not stop the grid
            self.sink.take(cell.run_id)
            return CellResult.harness_error(f"{type(exc).__name__}: {exc}")
        record, files = self.sink.take(cell.run_id)
        if record is None:  # run_cell returns only after storing one: a harness bug, recorded as such
            return CellResult.harness_error("the run ended without a stored record")
        return CellResult.done(record, files)

    def interrupt(self) -> None:
        """Ctrl-C: kill every in-flight adapter now (their cells end as ``interrupted``)."""
        self.launcher.interrupt()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.launcher.close()
        if self.gateway is not None:
            self.gateway_cpu_s = self.gateway.thread_cpu_s()
            self.gateway.stop()
        remove_tree(self.work_dir)
        if self._socket_dir is not None:
            remove_tree(Path(self._socket_dir))
        os.close(self._owner_fd)  # after the folder is gone: a sweeper never races this node


def _load_inputs(spec: GridSpec) -> GridInputs:
    """A remote node's own data, venvs, task envs and policies, at the spec's paths."""
    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import ensure_task_envs, load_tasks
    from claimgrid.inputs.venvs import build_all, load_venvs
    from claimgrid.reference.registry import load_policies

    tasks = load_tasks(Path(spec.data.tasks_dir))
    venvs = load_venvs(Path(spec.data.venvs))
    entries = {name: venvs[name] for name in spec.selection.frameworks}
    build_all(entries)  # a no-op stamp check where they are built already
    ensure_task_envs(tasks.values())
    for path in spec.policies:
        load_policies(path)
    conditions = Path(spec.data.conditions_dir)
    return GridInputs(tasks, load_content_conditions(conditions), load_swap_conditions(conditions), entries)
