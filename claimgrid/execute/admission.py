"""When the scheduler may start another run: cores, not runs in flight, are the limit.

A run in flight is not always using a core. It can sit in a fixed wait the experiment
imposes (the ``slow`` fault model answers 17 s past the per-call deadline, ``rate-limited``
makes the framework honour ``Retry-After``), in a framework's own back-off sleep, or on a
real provider's network latency. With ``--jobs`` as a fixed pool, the slots are often
held by runs that are asleep (bench/throughput.py prints how close the default matrix
comes to the machine's floor).

So the scheduler keeps two limits:

* ``jobs``: runs *using CPU* at once (default: the machine's cores). A run counts as busy
  unless its adapter process used less than ``IDLE_SHARE`` of a core over the last
  ``WINDOW_S`` (read from ``/proc/<pid>/stat``: user+system time of the process and of
  the children it has reaped, i.e. the tool commands it ran). A run that is starting,
  being verified or stored has no adapter process and counts as busy.
* ``max_inflight``: runs in flight at all (memory, file descriptors, the providers'
  connection limits), whatever they are doing.

A new run starts while ``inflight < jobs``; past that, only while ``inflight <
max_inflight``, ``inflight - idle < jobs`` *and* the grid's own processes (the driver with
its gateway and verifier threads and reaped sandboxes, plus every adapter in flight) used
no more than ``jobs - SPARE_CORES`` cores over the window. The last condition matters
because an idle adapter is often waiting on the driver (the gateway answering, the
verifier of another run): then the grid's cores are busy and another run would only
contend. It counts the grid's own CPU, not the machine's, so a neighbour's load neither
stops the gate nor is taken for the grid's. The classification of a run does not depend on
any of this: every run has its own deadlines, and the gate only decides *when* a queued
run starts.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from claimgrid import procstat
from claimgrid.localmodel import is_local

WINDOW_S = 0.25  # how far back a run's CPU share is measured
IDLE_SHARE = 0.10  # under 10% of one core over the window: the run is waiting, not working
SPARE_CORES = 0.5  # CPU the grid must leave unused of its jobs before a run starts beyond them
POLL_S = 0.1  # how often the scheduler re-reads the in-flight runs while it has work queued
# Runs in flight per core when nothing else limits them. Each run forked from a warm parent
# adds its own private memory to the process tree; bench/throughput.py prints the figure.
INFLIGHT_PER_JOB = 4


def cpu_seconds(pid: int) -> float | None:
    """User+system CPU of ``pid`` and of its reaped children, or None once it is gone."""
    return procstat.cpu_seconds(f"/proc/{pid}/stat", children=True)


class Activity:
    """Per-pid CPU samples over a sliding window (thread-safe; vanished pids are dropped).

    ``sample(pids)`` returns ``(idle, cores)``: how many of ``pids`` are idle, and the cores
    ``pids`` plus the driver itself used over the window. A pid is idle only when a sample
    at least ``window_s`` old exists and the CPU it used since is under ``idle_share`` of
    the elapsed time: a pid seen for the first time is busy until proven otherwise.
    """

    def __init__(
        self,
        window_s: float = WINDOW_S,
        idle_share: float = IDLE_SHARE,
        read: Callable[[int], float | None] = cpu_seconds,
        clock: Callable[[], float] = time.monotonic,
        driver_pid: int | None = None,
    ):
        self.window_s, self.idle_share = window_s, idle_share
        self._read, self._clock = read, clock
        self.driver_pid = os.getpid() if driver_pid is None else driver_pid
        self._samples: dict[int, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def _rate(self, pid: int, now: float, cpu: float) -> float | None:
        samples = self._samples.setdefault(pid, [])
        samples.append((now, cpu))
        # Keep the newest sample that is at least a window old, and everything after it.
        while len(samples) > 1 and now - samples[1][0] >= self.window_s:
            samples.pop(0)
        t_old, cpu_old = samples[0]
        return (cpu - cpu_old) / (now - t_old) if now - t_old >= self.window_s else None

    def sample(self, pids: Iterable[int]) -> tuple[int, float]:
        now = self._clock()
        idle, cores = 0, 0.0
        with self._lock:
            live = set()
            for pid in [self.driver_pid, *pids]:
                cpu = self._read(pid)
                if cpu is None or pid in live:
                    continue
                live.add(pid)
                rate = self._rate(pid, now, cpu)
                if rate is None:
                    continue
                cores += rate
                if pid != self.driver_pid and rate < self.idle_share:
                    idle += 1
            for pid in list(self._samples):
                if pid not in live:
                    del self._samples[pid]
        return idle, cores


class Admission:
    """The scheduler's gate: ``may_start(inflight)`` under both limits (module docstring).

    ``running_pids`` returns the adapter pids in flight (``Launcher.running_pids``). Counts
    how often a run started beyond ``jobs`` because others were idle (``oversubscribed``),
    so a grid's meta can show that the gate was used.
    """

    def __init__(
        self, jobs: int, max_inflight: int, running_pids: Callable[[], Iterable[int]], activity: Activity | None = None
    ):
        if jobs < 1 or max_inflight < jobs:
            raise ValueError(f"need 1 <= jobs <= max_inflight, got jobs={jobs}, max_inflight={max_inflight}")
        self.jobs, self.max_inflight = jobs, max_inflight
        self._pids = running_pids
        self.activity = activity or Activity()
        self.oversubscribed = 0  # runs started while jobs or more were in flight
        self.peak_inflight = 0

    def may_start(self, inflight: int) -> bool:
        if inflight >= self.max_inflight:
            return False
        # Sampled on every poll, so the window stays current while runs are in flight.
        idle_runs, cores = self.activity.sample(self._pids())
        if inflight < self.jobs:
            return True
        return inflight - idle_runs < self.jobs and cores <= self.jobs - SPARE_CORES

    def started(self, inflight_before: int) -> None:
        if inflight_before >= self.jobs:
            self.oversubscribed += 1
        self.peak_inflight = max(self.peak_inflight, inflight_before + 1)

    def facts(self) -> dict:
        return {
            "jobs": self.jobs,
            "max_inflight": self.max_inflight,
            "started_beyond_jobs": self.oversubscribed,
            "peak_inflight": self.peak_inflight,
        }


LOOKAHEAD = 64  # queued cells searched for one whose framework is ready


def next_cell(queue, ready: Callable[[str], bool]):
    """Take the first queued cell whose framework can start now (``ready(framework)``: its
    warm parent has finished preloading), else the first cell. At a grid's start every
    framework preloads at once; a run of a framework still importing would hold a job
    doing nothing while another framework's parent is ready."""
    known: dict[str, bool] = {}  # asked once per framework: a not-ready parent is probed by connecting
    for i in range(min(len(queue), LOOKAHEAD)):
        framework = queue[i].framework
        if framework not in known:
            known[framework] = ready(framework)
        if known[framework]:
            cell = queue[i]
            del queue[i]
            return cell
    return queue.popleft()


class NodeGate:
    """The gate of one node whose queue is kept elsewhere (the Ray driver): ``reserve``
    blocks until :class:`Admission` lets one more run start here and counts it in flight;
    ``release`` when that run ends (or the reservation goes unused). Thread-safe.

    The node keeps the local backend's rule (cores, not runs in flight, are the limit),
    sampled from its own adapters and its own process; the driver only sends a cell once a
    reservation came back, so a cell never waits queued on a node another could run it on."""

    def __init__(self, admission: Admission, poll_s: float = POLL_S):
        self.admission, self.poll_s = admission, poll_s
        self.inflight = 0
        self._cond = threading.Condition()
        self._closed = False

    def reserve(self) -> bool:
        """One slot, once the gate allows it; False when the gate was closed meanwhile."""
        with self._cond:
            while not self._closed:
                if self.admission.may_start(self.inflight):
                    self.admission.started(self.inflight)
                    self.inflight += 1
                    return True
                self._cond.wait(self.poll_s)  # re-sampled: an idle run frees a core, not only an end
            return False

    def release(self) -> None:
        with self._cond:
            self.inflight = max(0, self.inflight - 1)
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every ``reserve`` with False (the node is closing)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def default_max_inflight(jobs: int, connections: int = 0) -> int:
    """Runs in flight when the user does not say: ``INFLIGHT_PER_JOB`` per CPU job, and at
    least one per provider connection plus the CPU jobs (real models wait on the network)."""
    return max(jobs * INFLIGHT_PER_JOB, connections + jobs)


def spread(cells: list, key: Callable) -> list:
    """``cells`` reordered so each group (``key(cell)``) is spread evenly over the whole list.

    A group of n cells gets positions (i + 0.5) / n; ties keep the original order. The plan
    puts one model's cells together, so a model whose runs all wait (the ``slow`` fault
    model) would fill every slot at once and idle the cores; spread out, its waits overlap
    other models' work. Order within a group is kept."""
    groups: dict = {}
    for index, cell in enumerate(cells):
        groups.setdefault(key(cell), []).append(index)
    position = {}
    for members in groups.values():
        n = len(members)
        for i, index in enumerate(members):
            position[index] = ((i + 0.5) / n, index)
    return [cells[i] for i in sorted(range(len(cells)), key=position.__getitem__)]


# How early a queued run known to be long is started: once what is left of the grid would take
# no more than this many times its expected wall time. Above 1 so that the long runs, which end
# together with the rest only if they start in time, are not the grid's tail.
LONG_FIRST_MARGIN = 1.5


class LongFirst:
    """Starts a queued run early when runs like it were seen to outlast what is left of the grid.

    A grid's last minutes are its tail when a run that mostly waits (a fault model the
    framework retries for minutes, a call past its deadline) starts late: the cores finish
    everything else and idle until it ends. Which runs wait long is not known from a name; it
    is seen. Every finished run's wall time is noted under its ``key`` (default: framework
    and model, since the same framework on the same model behaves alike); the time left is the
    queued runs over the grid's rate so far. ``take(queue)`` removes and returns the first
    queued cell whose key's longest run so far is at least ``1 / LONG_FIRST_MARGIN`` of the
    time left, else None (the caller's own order then stands). The queue only shrinks, so a
    key a whole scan did not find is never scanned for again: near a grid's end every start
    asks, and a futile scan of the queue each time would cost the driver's main thread about
    half a millisecond per start. Only when a run starts changes, never what it does or how it
    is classified. The main thread's alone (not thread-safe).
    """

    def __init__(self, key: Callable = lambda c: (c.framework, c.model), clock: Callable[[], float] = time.monotonic):
        self.key, self.clock = key, clock
        self.started_at = clock()
        self.finished_runs = 0
        self.longest: dict = {}  # key -> the longest wall time seen for it (s)
        self.longest_any = 0.0
        self.gone: set = set()  # keys with no cell left in the queue (a whole scan found none)
        self.promoted = 0

    def finished(self, cell, wall_s: float) -> None:
        self.finished_runs += 1
        k = self.key(cell)
        self.longest[k] = max(self.longest.get(k, 0.0), wall_s)
        self.longest_any = max(self.longest_any, wall_s)

    def time_left(self, queued: int) -> float | None:
        """Seconds the queued runs would take at the grid's rate so far; None before any run ended."""
        elapsed = self.clock() - self.started_at
        if not self.finished_runs or elapsed <= 0:
            return None
        return queued / (self.finished_runs / elapsed)

    def take(self, queue):
        left = self.time_left(len(queue))
        if left is None or self.longest_any * LONG_FIRST_MARGIN < left:
            return None  # nothing seen so far is long enough to matter: no scan
        wanted = {k for k, wall in self.longest.items() if wall * LONG_FIRST_MARGIN >= left and k not in self.gone}
        if not wanted:
            return None
        for i, cell in enumerate(queue):
            if self.key(cell) in wanted:
                del queue[i]
                self.promoted += 1
                return cell
        self.gone |= wanted
        return None


@dataclass(frozen=True)
class Schedule:
    """How many runs a node keeps going: ``jobs`` using CPU, ``max_inflight`` in all, and the
    per-provider connection limits its gateway enforces (``connections``: default, per provider)."""

    jobs: int
    max_inflight: int
    connections_default: int = 10
    connections: tuple[tuple[str, int], ...] = ()

    def as_dict(self) -> dict:
        """The grid meta's ``schedule`` (resume reads it back with ``from_flags``)."""
        return {
            "jobs": self.jobs,
            "max_inflight": self.max_inflight,
            "max_connections": {"default": self.connections_default, "per_provider": dict(self.connections)},
        }


def schedule_from(
    jobs: int | None,
    max_inflight: int | None,
    max_connections: list[str] | None,
    meta: dict | None,
    models: Iterable[str],
) -> Schedule:
    """The grid's schedule: the values given (the flags; None: not given), else (``--resume``)
    what the grid recorded in ``meta``, else defaults.

    ``max_connections``: ``N`` / ``PROVIDER=N`` strings. ``models``: the grid's models and
    substitute; each distinct real provider among them adds its connection limit to the
    default ``max_inflight`` (they wait on the network)."""
    from claimgrid.gateway.connections import parse_limits

    old = (meta or {}).get("schedule") or {}
    jobs = jobs or (meta or {}).get("jobs") or os.cpu_count() or 2
    if max_connections:
        default, per = parse_limits(max_connections)
    else:
        conn = old.get("max_connections") or {}
        default, per = conn.get("default", 10), dict(conn.get("per_provider") or {})
    models = list(models)
    connections = provider_connections(models, default, dict(per))
    # A model the driver serves itself answers on this machine's cores, one call at a time: a
    # run waiting on it waits on the CPU, so such a grid keeps --jobs runs in flight (each local
    # model's per-call deadline counts the runs in flight that can queue at its server).
    local = any(is_local(m) for m in models)
    inflight = max_inflight or old.get("max_inflight") or (jobs if local else default_max_inflight(jobs, connections))
    return Schedule(
        jobs=jobs, max_inflight=max(inflight, jobs), connections_default=default, connections=tuple(sorted(per.items()))
    )


def provider_connections(models: Iterable[str], default: int, per: dict) -> int:
    """The connection limits of the distinct real providers among ``models`` added up (the
    runs that may wait on the network at once; reference models need none)."""
    from claimgrid.gateway.connections import provider_of
    from claimgrid.reference import registry

    providers = {provider_of(m) for m in dict.fromkeys(models) if not registry.is_reference(m)}
    return sum(per.get(p, default) for p in providers)
