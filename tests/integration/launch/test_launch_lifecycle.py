"""No adapter process or temporary folder outlives its run or its driver: a real kill -9
of a driver process in both isolation modes (a warm parent still preloading included),
a hung preload bounded by the run's own timeout, and an interrupt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from claimgrid.classify.classifier import classify_process
from claimgrid.launch import Launcher
from claimgrid.launch.kill import tree_members

from tests.conftest import ROOT
from tests.fixtures.frameworks.launch_helpers import fake_entries, make_ctl

DRIVER = ROOT / "tests" / "fixtures" / "frameworks" / "launch_driver.py"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids, folders, seconds=10.0) -> tuple[list[int], list[str]]:
    deadline = time.monotonic() + seconds
    while True:
        alive = [p for p in pids if not _gone(p)]
        left = [f for f in folders if os.path.exists(f)]
        if (not alive and not left) or time.monotonic() > deadline:
            return alive, left
        time.sleep(0.1)


@pytest.mark.parametrize(
    "isolation, framework, model", [("fresh", "fake", "hang"), ("warm", "fake", "hang"), ("warm", "slowload", "good")]
)
def test_kill_9_of_the_driver_leaves_no_process_and_no_folder(tmp_path, isolation, framework, model):
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), isolation, framework, model, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        info = json.loads(proc.stdout.readline())
        members = tree_members(info["pid"]) - {info["pid"]}
        grandchild = tmp_path / "sandbox" / "grandchild.pid"
        if model == "hang":
            members.add(int(grandchild.read_text()))
        assert members, "the driver has no adapter or warm parent to leave behind"
        assert all(os.path.isdir(f) for f in info["folders"])
        os.kill(info["pid"], signal.SIGKILL)
        proc.wait(10)
        alive, left = _wait_gone(members, info["folders"])
        assert alive == [] and left == [], (alive, left)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_hung_preload_is_the_runs_timeout_and_leaves_nothing(tmp_path):
    launcher = Launcher(fake_entries(), "warm", python=sys.executable, warm_start_timeout_s=180)
    try:
        t0 = time.monotonic()
        res = launcher.launch("slowload", make_ctl(tmp_path / "a", "good"), timeout_s=3)
        took = time.monotonic() - t0
        wp = launcher._warm.parent("slowload")
        ev = res.process_event
        assert ev["timed_out"] is True and "still preloading" in ev["launch_error"], ev
        assert classify_process([ev]) == "timeout"
        assert took < 8, took  # the run's 3 s, not the 180 s warm-start limit
        # The next run waits its own timeout again (the parent is still importing).
        res2 = launcher.launch("slowload", make_ctl(tmp_path / "b", "good"), timeout_s=1)
        assert res2.process_event["timed_out"] is True
    finally:
        launcher.close()
    alive, left = _wait_gone([wp.proc.pid], [wp.folder], seconds=5)
    assert alive == [] and left == []


@pytest.mark.parametrize("isolation", ["fresh", "warm"])
def test_interrupt_kills_what_is_in_flight_at_once(tmp_path, isolation):
    with Launcher(fake_entries(), isolation, python=sys.executable) as launcher:
        ctl = make_ctl(tmp_path / "a", "hang")
        box = {}
        thread = threading.Thread(target=lambda: box.setdefault("res", launcher.launch("fake", ctl, 120)))
        thread.start()
        pid_file = tmp_path / "a" / "sandbox" / "grandchild.pid"
        deadline = time.monotonic() + 30
        # The file exists before its pid is written: wait for the text, not the name.
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        t0 = time.monotonic()
        assert launcher.interrupt() >= 2  # the adapter and its grandchild
        thread.join(10)
        assert time.monotonic() - t0 < 3
        res = box["res"]
        assert res.interrupted is True and res.process_event["timed_out"] is False
        assert _wait_gone([grandchild, res.process_event["pid"]], [], 5) == ([], [])
        later = launcher.launch("fake", make_ctl(tmp_path / "b", "good"), 30)
        assert later.interrupted is True and "interrupted" in later.process_event["launch_error"]
        assert later.outcome is None


def test_prewarm_preloads_a_few_at_a_time_and_a_run_may_start_its_own(tmp_path):
    """``prewarm(parallel=1)``: while one framework's parent is still importing (here, forever)
    no other is started, and the scheduler is told the waiting one is not ready; a run of the
    waiting framework starts its parent itself and completes."""
    entries = fake_entries()
    order = {name: entries[name] for name in ("slowload", "fake")}
    launcher = Launcher(order, "warm", python=sys.executable, warm_start_timeout_s=180)
    try:
        launcher.prewarm(parallel=1)
        deadline = time.monotonic() + 10
        while launcher._warm.parent("slowload") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launcher._warm.parent("slowload") is not None
        time.sleep(1.0)  # prewarm polls every 0.05 s: long enough to have started "fake" if it would
        assert launcher._warm.parent("fake") is None
        assert launcher.ready("fake") is False and launcher.ready("slowload") is False
        res = launcher.launch("fake", make_ctl(tmp_path / "a", "good"), timeout_s=60)
        assert res.process_event["exit_code"] == 0 and res.process_event["timed_out"] is False, res.process_event
        assert launcher.ready("fake") is True
    finally:
        launcher.close()
