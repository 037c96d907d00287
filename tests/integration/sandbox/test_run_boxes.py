"""Per-run boxes (claimgrid/sandbox/slots.py) with the real guard, the real tool layer and
the real verifier:

* a fork bomb in one run's box leaves another run's test run alone (and, as the control,
  starves it when both share one uid, as every sandbox shared ``nobody`` before);
* memory is bounded per run, not per process, where the machine gives the harness cgroups;
* a sandbox that never starts is a harness failure (``UNKNOWN``), never a test failure;
* a box's cgroups and uid go back when it is released; a dead driver's groups are removed
  by the next start;
* inside ``run_command``: a private writable ``/tmp`` and ``HOME`` kept from one command to
  the next and outside the workspace, and git (status, diff, log, checkout, stash) working
  without the host's git configuration.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import pytest

from claimgrid.classify.classifier import classify_outcome
from claimgrid.launch.confine import agent_tmp, command_sandbox, hand_over
from claimgrid.sandbox.guard import PerRun
from claimgrid.sandbox.slots import GROUP_PREFIX, Box, Boxes
from claimgrid.verify.verifier import FinishedRun, Placement, VerifyOptions, run_tests, verify

from tests.integration.harness.test_harness_tools import GUARD, TASK_PYTHON, ht
from tests.integration.verify.test_verifier_guard import _fix

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid per run needs root (CI runs as root)")
# A test whose only work is to start a process: it fails when its uid may start no more.
FORKING_TEST = (
    "import subprocess, unittest\n"
    "class T(unittest.TestCase):\n"
    "    def test_starts_a_process(self):\n"
    "        self.assertEqual(subprocess.run(['/bin/true']).returncode, 0)\n"
)


def _procs_of(uid: int) -> int:
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            n += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            pass
    return n


GUARD_UID = 65534  # a sandbox without a box runs as nobody


def _bomb(ws, box: Box | None) -> subprocess.Popen:
    """A sandbox holding every process its uid may have, until killed."""
    argv = GUARD.wrap(
        ["/bin/bash", "-c", "for i in $(seq 2000); do sleep 60 & done 2>/dev/null; wait"],
        workspace=ws,
        per_run=PerRun(box=box),
    )
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uid = box.uid if box is not None else GUARD_UID
    deadline = time.monotonic() + 30
    while _procs_of(uid) < GUARD.limits.nproc - 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_of(uid) >= GUARD.limits.nproc - 2, "the bomb did not fill its allowance"
    return proc


@needs_root
def test_a_fork_bomb_fills_only_its_own_box(tmp_path):
    boxes = GUARD.limits.boxes(True)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_fork.py").write_text(FORKING_TEST)
    command = [TASK_PYTHON, "-m", "unittest", "-q"]
    results = {}
    for mode in ("shared uid", "own boxes"):
        bomber, other = boxes.lease(), boxes.lease()
        # The control: both sandboxes as one uid (what every sandbox was, as nobody), a leased
        # one so that no other test's sandbox on this machine shares the starved uid.
        shared = Box(uid=bomber.uid, gid=bomber.gid)
        bomb = _bomb(ws, bomber if mode == "own boxes" else shared)
        try:
            results[mode] = run_tests(
                command, ws, 60, GUARD, TASK_PYTHON, placement=Placement(box=other if mode == "own boxes" else shared)
            )
        finally:
            bomb.kill()
            bomb.wait()
            for box in (bomber, other):
                box.release()
    assert results["own boxes"]["passed"] is True, results["own boxes"]
    assert results["shared uid"]["passed"] is not True, results["shared uid"]  # the control: starved


def _eat(mib: int) -> str:
    return f"python3 -c \"import time; a = bytearray({mib} << 20); time.sleep(1.5); print('kept', {mib})\""


@needs_root
def test_memory_is_bounded_per_run(tmp_path):
    boxes = Boxes(as_root=True, pids=64, memory_bytes=128 << 20)
    if boxes.cgroup is None:
        pytest.skip(f"no cgroup for per-run memory here: {boxes.cgroup_reason}")
    assert "memory" in boxes.cgroup["parents"], boxes.facts()
    ws = tmp_path / "ws"
    ws.mkdir()
    three = f"{_eat(60)} & {_eat(60)} & {_eat(60)} & wait"
    box = boxes.lease()
    try:
        together = subprocess.run(
            GUARD.wrap(["/bin/bash", "-c", three], workspace=ws, per_run=PerRun(box=box)),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        box.release()
    assert together.stdout.count("kept") < 3, together  # three 60 MiB processes do not fit one 128 MiB run
    apart = []
    for _ in range(3):
        box = boxes.lease()
        try:
            apart.append(
                subprocess.run(
                    GUARD.wrap(["/bin/bash", "-c", _eat(60)], workspace=ws, per_run=PerRun(box=box)),
                    capture_output=True,
                    text=True,
                    timeout=120,
                ).stdout
            )
        finally:
            box.release()
    assert all("kept 60" in out for out in apart), apart


def test_a_sandbox_that_never_starts_is_unknown(tasks, workspace):
    template, ws, base = workspace("fix-float-add")
    _fix(ws)  # a correct fix: only the harness can make this fail
    # A process allowance of 0 while the uid has a process: setpriv's exec fails with EAGAIN,
    # as it did under another run's fork bomb when every sandbox shared one uid.
    starved = dataclasses.replace(GUARD, limits=dataclasses.replace(GUARD.limits, nproc=0))
    box = GUARD.limits.boxes(os.geteuid() == 0).lease()
    holder = subprocess.Popen(GUARD.wrap(["/bin/sleep", "60"], workspace=ws, per_run=PerRun(box=box)))
    try:
        deadline = time.monotonic() + 10
        while _procs_of(box.uid) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for guard, start_box in ((starved, box), (GUARD, Box(procs=(str(ws.parent / "no-group" / "cgroup.procs"),)))):
            events = verify(
                tasks["fix-float-add"],
                None,
                FinishedRun(template, ws, base),
                options=VerifyOptions(guard=guard, box=start_box),
            )
            (tests,) = [e for e in events if e["kind"] == "tests"]
            assert tests.get("started") is False and tests["passed"] is None, tests
            assert "the sandbox did not start" in tests["reason"] and tests["exit_code"] is None
            assert classify_outcome(events) == "UNKNOWN"
    finally:
        holder.kill()
        holder.wait()
        box.release()
    good = verify(tasks["fix-float-add"], None, FinishedRun(template, ws, base), options=VerifyOptions(guard=GUARD))
    assert classify_outcome(good) == "PASS"


ATTEMPTS = 5  # tries of the give-back check while other processes lease from the same range


@needs_root
def test_boxes_are_given_back_and_dead_drivers_groups_removed():
    boxes = GUARD.limits.boxes(True)
    a, b = boxes.lease(), boxes.lease()
    assert a.uid != b.uid and a.uid != 65534
    groups = a.groups
    assert all(os.path.isdir(g) for g in groups) and bool(groups) == (boxes.cgroup is not None)
    a.release()
    assert not any(os.path.exists(g) for g in groups)
    # Given back: the lowest free uid again. The uid locks are the machine's, so another
    # process's grid (a test worker beside this one) may lease that uid in the instant between
    # the release and this lease; a uid that was not given back is never leased again here.
    given_back = a.uid
    for _ in range(ATTEMPTS):
        c = boxes.lease()
        if c.uid == given_back:
            break
        given_back = c.uid  # another process holds the first; the next try gives back this one
        c.release()
    assert c.uid == given_back
    for box in (b, c):
        box.release()
    if boxes.cgroup is None:
        return
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid no process has now: a driver killed before its watchdog ran
    ns = os.stat("/proc/self/ns/pid").st_ino
    stale = [os.path.join(p, f"{GROUP_PREFIX}{ns}-{dead.pid}-0badc0de") for p in set(boxes.cgroup["parents"].values())]
    for folder in stale:
        os.mkdir(folder)
    GUARD.limits.boxes(True)  # the next start
    assert not any(os.path.exists(f) for f in stale)


def test_run_command_has_tmp_home_and_git(tmp_path):
    ws, sandbox = tmp_path / "ws", tmp_path / "sandbox"
    ws.mkdir()
    sandbox.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "fixture"]):
        subprocess.run(git + args, check=True, capture_output=True)
    boxes = GUARD.limits.boxes(os.geteuid() == 0)
    box = boxes.lease()
    try:
        hand_over(GUARD, ws, box)
        tmp = agent_tmp(GUARD, tmp_path / "tmp", box)
        ctl = {
            "workspace": str(ws),
            "sandbox": str(sandbox),
            "budgets": {"command_timeout_s": 20, "max_output_chars": 4000},
            "command_sandbox": command_sandbox(GUARD, ws, TASK_PYTHON, 20, box, tmp),
        }
        channel = ht.ToolChannel(None)
        run = {t.name: t for t in ht.make_tools(ctl, channel)}["run_command"]
        steps = [
            "echo scratch > /tmp/kept.txt && mkdir -p $HOME/.cache && echo $HOME && mktemp",
            "cat /tmp/kept.txt",  # the next command still has it
            "echo 'x = 2' > a.py && git status --short",
            "git diff",
            "git log --oneline",
            "git stash && git stash list && git stash pop",
            "git checkout -- a.py && git status --short && cat a.py",
        ]
        outs = []
        for command in steps:
            outs.append(run(command=command))
            assert channel.events[-1]["exit_code"] == 0, (command, outs[-1])
    finally:
        box.release()
    assert "/tmp" in outs[0] and "scratch" in outs[1]
    assert "M a.py" in outs[2] and "+x = 2" in outs[3] and "fixture" in outs[4]
    assert "x = 1" in outs[6] and "gitconfig" not in " ".join(outs).lower()
    assert sorted(os.listdir(ws)) == [".git", "a.py"]  # temp files never became workspace changes
