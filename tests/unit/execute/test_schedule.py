"""The scheduler's gate (claimgrid.execute.admission): cores, not runs in flight, are the limit.

Units, on injected readings: the CPU-share sampler, the gate's two limits, the spread
order, the long-runs-first rule (LongFirst), the schedule recorded for a resume, and the
framework-readiness order. The same
gate through the real pipeline is tests/grid/execute/test_schedule_grid.py; the
per-provider connection limit in front of a real gateway is
tests/integration/gateway/test_connections.py.
"""

from __future__ import annotations

import collections

import pytest

from claimgrid.execute.admission import (
    LONG_FIRST_MARGIN,
    Activity,
    Admission,
    LongFirst,
    Schedule,
    default_max_inflight,
    spread,
)
from claimgrid.execute.cells import plan
from claimgrid.execute.spec import Selection
from claimgrid.gateway.connections import parse_limits
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import load_tasks
from claimgrid.reference import registry

# --------------------------------------------------------------------------- units


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_pid_is_idle_only_after_a_whole_window_under_the_share():
    clock, cpu = Clock(), {1: 0.0, 2: 0.0, 99: 0.0}
    act = Activity(window_s=0.25, idle_share=0.1, read=cpu.get, clock=clock, driver_pid=99)
    assert act.sample([1, 2]) == (0, 0.0)  # first sight: busy until proven otherwise
    clock.t = 0.1
    cpu[1] += 0.1
    assert act.sample([1, 2])[0] == 0  # not a whole window yet
    clock.t = 0.3
    cpu[1] += 0.2  # pid 1: 0.3 s CPU in 0.3 s; pid 2: none
    cpu[99] += 0.15  # the driver: half a core
    idle, cores = act.sample([1, 2])
    assert idle == 1
    assert cores == pytest.approx(1.0 + 0.5)
    clock.t = 0.6
    cpu[2] += 0.2  # pid 2 wakes up; pid 1 sleeps
    assert act.sample([1, 2])[0] == 1
    assert act.sample([2])[0] == 0 and 1 not in act._samples  # a pid that is gone is dropped


def test_the_gate_starts_past_jobs_only_when_a_run_waits_and_the_grid_has_cores_to_spare():
    class Fixed:
        def __init__(self):
            self.idle, self.cores = 0, 0.0

        def sample(self, pids):
            return self.idle, self.cores

    act = Fixed()
    gate = Admission(jobs=2, max_inflight=4, running_pids=lambda: [], activity=act)
    assert gate.may_start(0) and gate.may_start(1)
    assert not gate.may_start(2)  # two busy runs hold both jobs
    act.idle, act.cores = 1, 1.9
    assert not gate.may_start(2)  # one waits, but the grid's CPU is busy
    act.cores = 1.0
    assert gate.may_start(2)
    act.idle = 3
    assert gate.may_start(3) and not gate.may_start(4)  # never past max_inflight
    with pytest.raises(ValueError):
        Admission(jobs=3, max_inflight=2, running_pids=list)


def test_spread_keeps_every_cell_and_each_groups_order_and_spaces_a_small_group_out():
    cells = [("big", i) for i in range(12)] + [("small", i) for i in range(3)]
    out = spread(cells, key=lambda c: c[0])
    assert sorted(out) == sorted(cells)
    for group in ("big", "small"):
        assert [c for c in out if c[0] == group] == [c for c in cells if c[0] == group]
    where = [i for i, c in enumerate(out) if c[0] == "small"]
    assert where[0] > 0 and where[-1] < len(out) - 1
    assert min(b - a for a, b in zip(where, where[1:])) >= 4  # 15 cells, 3 of them: ~5 apart


def test_long_first_takes_nothing_until_a_kind_is_seen_to_outlast_the_time_left():
    clock = Clock()
    lf = LongFirst(key=lambda c: c[0], clock=clock)
    queue = collections.deque([("short", i) for i in range(20)] + [("long", 0), ("short", 20), ("long", 1)])
    assert lf.take(queue) is None  # no run has ended: nothing is known
    clock.t = 10.0
    for i in range(10):
        lf.finished(("short", i), 1.0)  # 1 run/s so far: 23 queued = 23 s left
    lf.finished(("long", -1), 10.0)
    assert lf.take(queue) is None  # 10 s * margin < 23 s: still in time
    assert len(queue) == 23
    for _ in range(8):
        queue.popleft()  # 15 queued: 15 s left at 11 runs / 10 s
    left = lf.time_left(len(queue))
    assert 10.0 * LONG_FIRST_MARGIN >= left
    assert lf.take(queue) == ("long", 0) and lf.take(queue) == ("long", 1)
    assert lf.take(queue) is None  # no long cell is left; shorts keep their order
    assert [c[1] for c in queue] == list(range(8, 21)) and lf.promoted == 2


def _makespan(cells, slots: int, long_first: bool) -> tuple[float, float]:
    """Simulated grid: ``slots`` runs at once, a cell ``(kind, seconds)`` takes its seconds.
    Returns (when the last run ended, when the last long run started)."""
    clock = Clock()
    lf = LongFirst(key=lambda c: c[0], clock=clock)
    queue, running, last_long_start = collections.deque(cells), [], 0.0
    while queue or running:
        while queue and len(running) < slots:
            cell = (lf.take(queue) if long_first else None) or queue.popleft()
            running.append((clock.t + cell[1], clock.t, cell))
            if cell[0] == "long":
                last_long_start = clock.t
        running.sort()
        end, start, cell = running.pop(0)
        clock.t = end
        lf.finished(cell, end - start)
    return clock.t, last_long_start


def test_long_first_ends_a_grid_whose_long_runs_would_start_last_sooner():
    # 400 one-second runs and four that wait 60 s, spread as the plan spreads a model's cells.
    cells = spread([("short", 1.0)] * 400 + [("long", 60.0)] * 4, key=lambda c: c[0])
    plain, plain_last = _makespan(cells, slots=4, long_first=False)
    early, early_last = _makespan(cells, slots=4, long_first=True)
    assert plain > plain_last + 59  # the last long run is the grid's tail
    assert early < plain - 20 and early_last < plain_last
    assert early <= 400 / 4 + 60  # at most one long wait past the shorts' own time


def test_default_inflight_follows_cores_and_provider_connections():
    assert default_max_inflight(2) == 8
    assert default_max_inflight(2, connections=20) == 22
    assert parse_limits(["4", "openai=2"]) == (4, {"openai": 2})
    for bad in ("0", "x", "=3", "openai=two"):
        with pytest.raises(ValueError, match="--max-connections"):
            parse_limits([bad])


def test_the_plan_and_the_schedule_cover_the_same_cells():
    """The spread order is a permutation of the plan: nothing added, nothing lost."""
    content, swap = load_content_conditions(), load_swap_conditions()
    sel = Selection(
        frameworks=["fw-a", "fw-b"],
        tasks=sorted(load_tasks())[:2],
        content=sorted(content),
        swap=sorted(swap),
        models=registry.default_models(),
        substitute=registry.default_substitute(),
        repeats=2,
    )
    cells = plan(sel, content, swap)
    assert sorted(spread(cells, key=lambda c: c.model), key=lambda c: c.run_id) == sorted(cells, key=lambda c: c.run_id)


def test_a_schedule_is_recorded_and_read_back_on_resume():
    s = Schedule(3, 12, 10, (("openai", 5),))
    assert s.as_dict() == {
        "jobs": 3,
        "max_inflight": 12,
        "max_connections": {"default": 10, "per_provider": {"openai": 5}},
    }
    from claimgrid.execute.admission import schedule_from

    ref = [m for m in registry.default_models()]
    assert schedule_from(3, None, ["openai=5"], None, ref) == Schedule(3, 12, 10, (("openai", 5),))

    again = schedule_from(None, None, None, {"jobs": 3, "schedule": s.as_dict()}, ref)  # --resume, no flags
    assert again == s


def test_a_grid_with_a_local_model_keeps_jobs_runs_in_flight():
    """Runs waiting on a model this machine serves wait on its CPU: the default in flight is
    --jobs (the local model's deadline counts them), a given --max-inflight still wins."""
    from claimgrid.execute.admission import schedule_from

    ref = registry.default_models()
    assert schedule_from(2, None, None, None, ref).max_inflight == 8  # 4 per job
    local = [*ref, "local/some-model"]
    assert schedule_from(2, None, None, None, local).max_inflight == 2
    assert schedule_from(2, 6, None, None, local).max_inflight == 6


def test_a_cell_of_a_framework_still_preloading_waits_for_one_that_is_ready():
    import collections

    from claimgrid.execute.admission import next_cell

    class C:
        def __init__(self, framework, i):
            self.framework, self.i = framework, i

    queue = collections.deque([C("slow-to-load", 0), C("slow-to-load", 1), C("loaded", 2), C("loaded", 3)])
    ready = {"slow-to-load": False, "loaded": True}
    assert next_cell(queue, ready.get).i == 2
    ready["loaded"] = False  # nobody ready: the head, in order
    assert next_cell(queue, ready.get).i == 0
    ready["slow-to-load"] = True
    assert [next_cell(queue, ready.get).i for _ in range(2)] == [1, 3]
