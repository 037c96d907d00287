"""Launcher fault handling in both isolation modes: hang, crash, garbage; later runs unaffected."""

from __future__ import annotations

import os
import sys
import time

import pytest

from claimgrid.launch import Launcher

from tests.fixtures.frameworks.launch_helpers import fake_entries, make_ctl


@pytest.fixture(params=["fresh", "warm"])
def launcher(request):
    with Launcher(fake_entries(), request.param, python=sys.executable) as launcher:
        yield launcher


def _gone(pid: int) -> bool:
    """Dead: no /proc entry, or a zombie waiting for a reaper that is not ours."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_hanging_adapter_is_killed_with_its_grandchild(launcher, tmp_path):
    ctl = make_ctl(tmp_path, "hang")
    res = launcher.launch("fake", ctl, timeout_s=2)
    ev = res.process_event
    assert ev["timed_out"] is True and ev["signal"] == "SIGKILL" and ev["exit_code"] is None
    assert ev["isolation"] == launcher.isolation
    assert res.outcome_status == "missing" and res.outcome is None
    grandchild = int((tmp_path / "sandbox" / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild)
    assert _gone(ev["pid"])


@pytest.mark.parametrize(
    "model, status",
    [
        ("crash", "ok"),
        ("garbage_outcome", "unparseable"),
        ("invalid_outcome", "invalid"),
        ("no_outcome", "missing"),
    ],
)
def test_faults_become_results_and_a_good_run_follows(launcher, tmp_path, model, status):
    bad = launcher.launch("fake", make_ctl(tmp_path / "bad", model), timeout_s=20)
    assert bad.outcome_status == status
    assert bad.process_event["outcome_status"] == status and bad.process_event["timed_out"] is False
    if model == "crash":
        err = bad.outcome["error"]
        assert err["type"] == "RuntimeError" and err["message"] == "adapter exploded"
        assert "adapter.py" in err["traceback_tail"] and bad.outcome["final_text"] is None
        assert bad.process_event["exit_code"] == 0  # the harness itself did its job
    else:
        assert bad.outcome is None
    if status == "invalid":
        assert "final_text" in bad.process_event["outcome_problem"]
    good = launcher.launch("fake", make_ctl(tmp_path / "good", "good"), timeout_s=20)
    assert good.outcome_status == "ok" and good.outcome["final_text"] == "DONE"
    assert [e["tool"] for e in good.tool_events] == [
        "list_dir",
        "read_file",
        "write_file",
        "edit_file",
        "search",
        "run_command",
    ]


def test_garbage_on_stdout_is_only_a_log(launcher, tmp_path):
    res = launcher.launch("fake", make_ctl(tmp_path, "garbage_stdout"), timeout_s=20)
    assert res.outcome_status == "ok" and res.outcome["final_text"] == "DONE"
    assert len(res.tool_events) == 6 and "tools_channel_garbage" not in res.process_event
    assert "junk on stderr" in res.process_event["stderr_tail"]
    assert os.path.getsize(res.stdout_path) > 1000


def test_chatty_agent_does_not_block_on_the_pipe(launcher, tmp_path):
    res = launcher.launch("fake", make_ctl(tmp_path, "chatty"), timeout_s=60)
    assert res.outcome_status == "ok" and res.process_event["timed_out"] is False
    assert len(res.tool_events) == 3000  # > 64 KiB of events: drained while the run went on
    assert [e["seq"] for e in res.tool_events] == list(range(3000))


def test_runs_in_parallel_threads(launcher, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        futs = [
            pool.submit(launcher.launch, "fake", make_ctl(tmp_path / str(i), "good", run_id=f"r-{i}"), 30)
            for i in range(4)
        ]
        results = [f.result() for f in futs]
    assert [r.outcome["run_id"] for r in results] == ["r-0", "r-1", "r-2", "r-3"]
    assert all(len(r.tool_events) == 6 for r in results)


def test_warm_parent_that_cannot_preload_is_a_result(tmp_path):
    with Launcher(fake_entries(), "warm", python=sys.executable) as launcher:
        res = launcher.launch("broken", make_ctl(tmp_path, "good"), timeout_s=20)
    assert res.outcome_status == "missing"
    assert "during preload" in res.process_event["launch_error"]
    assert "framework not installed" in res.process_event["stderr_tail"]


def test_fresh_mode_preloads_too(tmp_path):
    with Launcher(fake_entries(), "fresh", python=sys.executable) as launcher:
        res = launcher.launch("broken", make_ctl(tmp_path, "good"), timeout_s=20)
    assert res.outcome_status == "ok" and res.outcome["error"]["type"] == "ImportError"


def test_dead_warm_parent_is_restarted(tmp_path):
    with Launcher(fake_entries(), "warm", python=sys.executable) as launcher:
        first = launcher.launch("fake", make_ctl(tmp_path / "a", "good"), timeout_s=20)
        wp = launcher._warm.parent("fake")
        wp.proc.kill()
        wp.proc.wait()
        second = launcher.launch("fake", make_ctl(tmp_path / "b", "good"), timeout_s=20)
        assert launcher.warm_parent_pid("fake") != wp.proc.pid
    assert first.outcome_status == second.outcome_status == "ok"
