"""The scheduler's gate (claimgrid.execute.admission): cores, not runs in flight, are the limit.

Units: the CPU-share sampler, the gate's two limits and the spread order, on injected
readings. Through the real pipeline (grid.py, the plain framework, the real gateway and
its fault models): a run that waits on a gateway delay does not hold a job, so another run
starts and finishes inside the wait; with ``--max-inflight 1`` none does; classifications
are the same either way. Per-provider connection limits: the real gateway in front of a
loopback provider never has more calls in flight to it than ``--max-connections``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from claimgrid.reference import registry
from claimgrid.execute.admission import Activity, Admission, Schedule, default_max_inflight, spread
from claimgrid.execute.cells import plan
from claimgrid.execute.spec import Selection
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.gateway import Gateway
from claimgrid.gateway.connections import Connections, parse_limits
from claimgrid.reference.gateway_faults import delay_s, gateway_faults
from claimgrid.inputs.tasks import load_tasks
from claimgrid.store.lines import read_runs

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- units

class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_pid_is_idle_only_after_a_whole_window_under_the_share():
    clock, cpu = Clock(), {1: 0.0, 2: 0.0, 99: 0.0}
    act = Activity(window_s=0.25, idle_share=0.1, read=cpu.get, clock=clock, driver_pid=99)
    assert act.sample([1, 2]) == (0, 0.0)          # first sight: busy until proven otherwise
    clock.t = 0.1
    cpu[1] += 0.1
    assert act.sample([1, 2])[0] == 0               # not a whole window yet
    clock.t = 0.3
    cpu[1] += 0.2                                   # pid 1: 0.3 s CPU in 0.3 s; pid 2: none
    cpu[99] += 0.15                                 # the driver: half a core
    idle, cores = act.sample([1, 2])
    assert idle == 1
    assert cores == pytest.approx(1.0 + 0.5)
    clock.t = 0.6
    cpu[2] += 0.2                                   # pid 2 wakes up; pid 1 sleeps
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
    assert not gate.may_start(2)                    # two busy runs hold both jobs
    act.idle, act.cores = 1, 1.9
    assert not gate.may_start(2)                    # one waits, but the grid's CPU is busy
    act.cores = 1.0
    assert gate.may_start(2)
    act.idle = 3
    assert gate.may_start(3) and not gate.may_start(4)   # never past max_inflight
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
    assert min(b - a for a, b in zip(where, where[1:])) >= 4   # 15 cells, 3 of them: ~5 apart


def test_default_inflight_follows_cores_and_provider_connections():
    assert default_max_inflight(2) == 8
    assert default_max_inflight(2, connections=20) == 22
    assert parse_limits(["4", "openai=2"]) == (4, {"openai": 2})
    for bad in ("0", "x", "=3", "openai=two"):
        with pytest.raises(ValueError, match="--max-connections"):
            parse_limits([bad])


# --------------------------------------------------------------------------- real grids

def _grid(tmp_path: Path, venvs: Path, name: str, *flags: str) -> tuple[dict, dict]:
    out = tmp_path / name
    proc = subprocess.run([sys.executable, str(ROOT / "grid.py"), "run", "--venvs", str(venvs), "--out", str(out),
                           "--no-progress", *flags], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    records = {r["run_id"]: r for r in read_runs(out / "runs.jsonl").values}
    return meta, records


def _untreated_selection() -> list[str]:
    """One task, the untreated cell, the fault model with the longest gateway delay first,
    then one behaviour model: all read from the data and the registry."""
    content, swap = load_content_conditions(), load_swap_conditions()
    c = next(n for n, cond in content.items() if cond.carries is None)
    s = next(n for n, cond in swap.items() if cond.unavailable_from_call < 0)
    waits = {name: delay_s(f, 15.0) for name, f in gateway_faults().items()}
    waiting = max(waits, key=waits.get)
    assert waits[waiting] > 1, "no registered fault model delays its answer"
    other = next(m for m in registry.default_models() if not registry.get(m).fault)
    task = next(t for t, spec in sorted(load_tasks().items()) if spec.suite == "default" and spec.role == "builder")
    return ["--tasks", task, "--content", c, "--swap", s, "--models", f"{waiting},{other}"]


def _interval(rec: dict) -> tuple[float, float]:
    t = rec["timings"]
    return t["started_unix"], t["started_unix"] + t["wall_s"]


def test_a_waiting_run_does_not_hold_the_only_job(tmp_path, plain_venvs):
    sel = _untreated_selection()
    meta, records = _grid(tmp_path, plain_venvs, "gated", "--jobs", "1", *sel)
    ctrl_meta, ctrl = _grid(tmp_path, plain_venvs, "one-at-a-time", "--jobs", "1", "--max-inflight", "1", *sel)
    waiting = sel[-1].split(",")[0]
    assert len(records) == len(ctrl) == 2

    slow = next(r for r in records.values() if r["model"] == waiting)
    other = next(r for r in records.values() if r["model"] != waiting)
    s0, s1 = _interval(slow)
    o0, o1 = _interval(other)
    assert s0 < o0 and o1 < s1, "the other run did not start and finish inside the waiting run"
    assert meta["scheduler"]["started_beyond_jobs"] >= 1 and meta["scheduler"]["peak_inflight"] == 2
    assert meta["schedule"]["jobs"] == 1

    c_slow = next(r for r in ctrl.values() if r["model"] == waiting)
    c_other = next(r for r in ctrl.values() if r["model"] != waiting)
    a, b = sorted([_interval(c_slow), _interval(c_other)])
    assert a[1] <= b[0], "with --max-inflight 1 the runs overlapped"
    assert ctrl_meta["scheduler"]["started_beyond_jobs"] == 0

    assert {k: r["classification"] for k, r in records.items()} == {k: r["classification"] for k, r in ctrl.items()}


def test_the_plan_and_the_schedule_cover_the_same_cells():
    """The spread order is a permutation of the plan: nothing added, nothing lost."""
    content, swap = load_content_conditions(), load_swap_conditions()
    sel = Selection(frameworks=["fw-a", "fw-b"], tasks=sorted(load_tasks())[:2], content=sorted(content),
                    swap=sorted(swap), models=registry.default_models(),
                    substitute=registry.default_substitute(), repeats=2)
    cells = plan(sel, content, swap)
    assert sorted(spread(cells, key=lambda c: c.model), key=lambda c: c.run_id) == sorted(cells, key=lambda c: c.run_id)


# --------------------------------------------------------------------------- connections

def test_calls_to_one_provider_never_exceed_max_connections(tasks, monkeypatch):
    from tests.fake_upstream import FakeUpstream
    from tests.test_gateway_support import http_turn, script

    inner = Gateway()
    inner.start()
    inner.register("inner", script(next(iter(tasks.values())), model=registry.default_models()[0], max_model_calls=1000))
    up = FakeUpstream(inner, "inner", lambda key, n: ("slow", 0.4)).start()
    monkeypatch.setenv("OPENAI_API_BASE", up.url)
    monkeypatch.setenv("OPENAI_API_KEY", "fake-upstream-key")
    conns = Connections(default=2)
    gw = Gateway(connections=conns)
    gw.start()
    try:
        model = "openai/gpt-4o-mini"
        tokens = [f"t{i}" for i in range(6)]
        for t in tokens:
            gw.register(t, script(next(iter(tasks.values())), model=model))
        threads = [threading.Thread(target=http_turn, args=(gw.url, t, model, [{"role": "user", "content": "go"}], False))
                   for t in tokens]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        events = [gw.finish(t)[0][0] for t in tokens]
    finally:
        gw.stop()
        up.stop()
        inner.stop()
    assert all(e["status"] == 200 for e in events), [e["error"] for e in events]
    assert up.peak_in_flight == 2
    assert conns.facts()["peak"] == {"openai": 2}
    queued = sorted(e["queued_ms"] for e in events)          # recorded for every real-provider call
    # Six 0.4 s calls through two connections: at least four waited for one (how the first
    # two arrive depends on the machine's load, so no bound on them).
    assert sum(q >= 300 for q in queued) >= 4, queued


def test_a_schedule_is_recorded_and_read_back_on_resume():
    s = Schedule(3, 12, 10, (("openai", 5),))
    assert s.as_dict() == {"jobs": 3, "max_inflight": 12,
                           "max_connections": {"default": 10, "per_provider": {"openai": 5}}}
    from claimgrid.execute.admission import schedule_from
    ref = [m for m in registry.default_models()]
    assert schedule_from(3, None, ["openai=5"], None, ref) == Schedule(3, 12, 10, (("openai", 5),))

    again = schedule_from(None, None, None, {"jobs": 3, "schedule": s.as_dict()}, ref)  # --resume, no flags
    assert again == s


def test_a_cell_of_a_framework_still_preloading_waits_for_one_that_is_ready():
    import collections

    from claimgrid.execute.admission import next_cell

    class C:
        def __init__(self, framework, i):
            self.framework, self.i = framework, i

    queue = collections.deque([C("slow-to-load", 0), C("slow-to-load", 1), C("loaded", 2), C("loaded", 3)])
    ready = {"slow-to-load": False, "loaded": True}
    assert next_cell(queue, ready.get).i == 2
    ready["loaded"] = False                            # nobody ready: the head, in order
    assert next_cell(queue, ready.get).i == 0
    ready["slow-to-load"] = True
    assert [next_cell(queue, ready.get).i for _ in range(2)] == [1, 3]
