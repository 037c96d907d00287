"""A grid stopped while the verifier's test run is in flight (a policy whose workspace makes
every module sleep at import, tests/fixtures/hostile_policies.py ``stalls-tests``):

* Ctrl-C (SIGINT to the process group) stops it within 5 s, the test run included, and
  nothing of that run is stored (so ``--resume`` runs it again);
* kill -9 of the driver: the watchdog kills the test run and removes the verifier's scratch
  folder with the rest of the work folder;
* either way no process of the grid and none of its per-run cgroups is left.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from claimgrid.execute.node import OWNER_FILE, WORK_PREFIX
from claimgrid.launch.kill import tree_members

from tests.conftest import ROOT
from tests.grid.execute.test_grid_interrupt import _gone
from tests.grid.execute.test_grid_resume import _lines

POLICIES = ROOT / "tests" / "fixtures" / "hostile_policies.py"
CELLS = ["--tasks", "fix-float-add", "--content", "clean", "--swap", "none", "--models", "stalls-tests"]


def _verifier_scratch(driver: int, members: set[int]) -> dict[int, str]:
    """pid -> the verifier scratch folder of a test run in flight in the grid of ``driver``.

    Named on the test run's command line (the overlay's upper folder), or, as root, behind the
    fixed view every test run sees (claimgrid.sandbox.sameview: the command line names only
    ``claimgrid-view`` folders): then the scratch folder is the one in the driver's own node work
    folder (its owner file names the driver's pid)."""
    out = {}
    viewed = []
    for pid in members:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        for arg in argv:
            if "/claimgrid-verify-" in arg and arg.endswith("/upper"):
                out[pid] = os.path.dirname(arg)
            elif "claimgrid-view/" in arg:
                viewed.append(pid)
    if out or not viewed:
        return out
    for root in {"/dev/shm", tempfile.gettempdir()}:
        for owner in glob.glob(os.path.join(root, WORK_PREFIX + "*", OWNER_FILE)):
            try:
                if open(owner).read().split() != ["pid", str(driver)]:
                    continue
            except OSError:
                continue
            found = glob.glob(os.path.join(os.path.dirname(owner), "**", "claimgrid-verify-*"), recursive=True)
            return {viewed[0]: found[0]} if len(found) == 1 and os.path.isdir(found[0]) else {}
    return {}


def _default_sigint() -> None:
    """The grid gets Ctrl-C's default action even where the test process ignores SIGINT (a
    Python child keeps an inherited SIG_IGN and then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _groups_of(driver: int) -> list[str]:
    """The per-run cgroups (claimgrid/sandbox/slots.py) the driver ``driver`` made, still there."""
    found = []
    for line in open("/proc/self/mounts"):
        mount, fstype = line.split()[1:3]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        for dirpath, dirnames, _ in os.walk(mount):
            found += [
                os.path.join(dirpath, d)
                for d in dirnames
                if d.startswith("claimgrid-") and d.split("-")[2:3] == [str(driver)]
            ]
            if dirpath.count("/") - mount.count("/") >= 3:
                dirnames[:] = []
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stop_with_a_test_run_in_flight(tmp_path, plain_venvs, sig):
    out = tmp_path / "grid"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--venvs",
            str(plain_venvs),
            "--policies",
            str(POLICIES),
            "--out",
            str(out),
            "--no-progress",
            *CELLS,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    scratch: dict[int, str] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        members = tree_members(proc.pid)
        scratch = _verifier_scratch(proc.pid, members)
        if scratch:
            break
        time.sleep(0.05)
    assert proc.poll() is None and scratch, "no verifier test run seen in flight"
    (folder,) = set(scratch.values())
    work = folder.split("/runs/")[0]  # the node's work folder, registered with the watchdog
    assert os.path.basename(work).startswith("claimgrid-"), folder
    members = tree_members(proc.pid) - {proc.pid}
    time.sleep(0.5)  # well inside the test run's sleep
    t0 = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    else:
        os.kill(proc.pid, signal.SIGKILL)  # the driver only
    try:
        text, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the grid did not stop")
    stopped_s = time.monotonic() - t0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not all(_gone(p) for p in members) or os.path.exists(work)):
        time.sleep(0.1)
    assert [p for p in members if not _gone(p)] == []
    assert not os.path.exists(folder) and not os.path.exists(work)
    assert _groups_of(proc.pid) == []  # the run's cgroups went with it (where it had any)
    if sig == signal.SIGKILL:
        return
    assert stopped_s < 5, (stopped_s, text[-1500:])  # the test run alone sleeps STALL_S
    assert proc.returncode == 130 and "--resume" in text, text[-2000:]
    # Nothing of the interrupted run is stored, so --resume runs it again like any missing
    # cell (tests/grid/execute/test_grid_interrupt.py resumes a stopped grid to completion).
    assert _lines(out / "runs.jsonl") == []
