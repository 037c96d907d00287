"""The Ray backend's node-side parity pieces, as units: each node's admission gate when the
queue is the driver's (``admission.NodeGate``), a node's limits from its own CPUs
(``ray.node_schedule``), and the removal of work folders of nodes that were killed with
their watchdog (``node.sweep_dead``). The same pieces through a real two-node cluster are
tests/grid/execute/test_backend_ray.py."""

from __future__ import annotations

import os
import threading

from claimgrid.execute.admission import Activity, Admission, NodeGate, default_max_inflight
from claimgrid.execute.node import OWNER_FILE, WORK_PREFIX, make_work_dir, sweep_dead
from claimgrid.execute.ray import node_schedule


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _gate(jobs, max_inflight, cpu, clock, pids):
    activity = Activity(window_s=0.25, idle_share=0.1, read=cpu.get, clock=clock, driver_pid=99)
    return NodeGate(Admission(jobs, max_inflight, lambda: list(pids), activity), poll_s=0.01)


def _reserve_in_thread(gate):
    got = []
    t = threading.Thread(target=lambda: got.append(gate.reserve()), daemon=True)
    t.start()
    return t, got


def test_a_node_gate_reserves_up_to_jobs_then_waits_until_a_run_ends():
    clock, cpu, pids = Clock(), {99: 0.0}, []
    gate = _gate(1, 4, cpu, clock, pids)
    assert gate.reserve() is True and gate.inflight == 1
    pids.append(7)
    cpu[7] = 0.0
    t, got = _reserve_in_thread(gate)  # the one run in flight is busy (first seen): no second start
    t.join(0.2)
    assert t.is_alive() and got == []
    gate.release()
    t.join(5)
    assert got == [True] and gate.inflight == 1
    assert gate.admission.facts()["started_beyond_jobs"] == 0


def test_a_node_gate_starts_beyond_jobs_while_its_runs_wait_and_never_past_max_inflight():
    clock, cpu, pids = Clock(), {99: 0.0, 7: 0.0}, [7]
    gate = _gate(1, 2, cpu, clock, pids)
    assert gate.reserve()
    gate.admission.may_start(1)  # first sample of the waiting run
    clock.t = 1.0  # a whole window later: run 7 used no CPU, nor did the node's own process
    assert gate.reserve() is True and gate.inflight == 2
    assert gate.admission.facts()["started_beyond_jobs"] == 1
    t, got = _reserve_in_thread(gate)  # max_inflight reached, however idle the runs are
    t.join(0.2)
    assert t.is_alive() and got == []
    gate.close()  # a closing node wakes its pending reservation with no slot
    t.join(5)
    assert got == [False] and gate.inflight == 2


def test_a_node_is_sized_by_its_own_cpus_unless_a_flag_says_otherwise():
    assert node_schedule(1.0, None, None) == {"jobs": 1, "max_inflight": default_max_inflight(1)}
    assert node_schedule(6.0, None, None) == {"jobs": 6, "max_inflight": default_max_inflight(6)}
    assert node_schedule(None, None, None)["jobs"] == 1  # a node with no CPU resource still runs
    assert node_schedule(6.0, 2, None) == {"jobs": 2, "max_inflight": default_max_inflight(2)}  # --jobs
    assert node_schedule(6.0, None, 3) == {"jobs": 3, "max_inflight": 3}  # --max-inflight caps both
    assert node_schedule(2.0, None, None, connections=10)["max_inflight"] == default_max_inflight(2, 10)


def test_sweep_removes_only_dead_nodes_folders(tmp_path):
    dead, dead_fd = make_work_dir(str(tmp_path))
    (dead / "templates" / "t").mkdir(parents=True)
    (dead / "templates" / "t" / "f.py").write_text("x")
    live, live_fd = make_work_dir(str(tmp_path))
    assert dead.name.startswith(WORK_PREFIX) and (dead / OWNER_FILE).is_file()
    os.close(dead_fd)  # the kernel drops the lock of a process killed with -9 the same way
    unowned = tmp_path / (WORK_PREFIX + "older")  # no owner file: not this sweep's to judge
    unowned.mkdir()
    other = tmp_path / "claimgrid-uids"  # another part's folder of the same prefix family
    other.mkdir()
    link = tmp_path / (WORK_PREFIX + "link")
    link.symlink_to(dead)
    try:
        assert sweep_dead(str(tmp_path)) == [str(dead)]
        assert not dead.exists() and live.is_dir() and unowned.is_dir() and other.is_dir() and link.is_symlink()
        assert sweep_dead(str(tmp_path)) == []  # a live node's folder stays, whoever asks
    finally:
        os.close(live_fd)
    assert sweep_dead(str(tmp_path)) == [str(live)]
