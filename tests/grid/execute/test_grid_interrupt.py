"""A real grid.py stopped mid-way: Ctrl-C (SIGINT to its process group, as a terminal
sends it) stops it within 5 s; kill -9 of the driver in fresh mode leaves no adapter;
neither leaves a process or a temporary folder behind, and ``--resume`` completes the
ledger with every cell exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from claimgrid.launch.kill import tree_members

from tests.conftest import ROOT
from tests.grid.execute.test_grid_resume import _lines

CELLS = [
    "--tasks",
    "fix-float-add,write-status",
    "--content",
    "clean,malicious",
    "--swap",
    "none,silent",
    "--models",
    "diligent,narrator",
]
N_CELLS = 2 * 2 * 2 * 2


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _folders_of(pids) -> set[str]:
    """The grid's temporary folders, read from its processes: a warm parent's --socket
    folder and the work folder an adapter runs in (its cwd is <work>/runs/<id>/sandbox/home)."""
    out = set()
    for pid in pids:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if "--socket" in argv:
            out.add(os.path.dirname(argv[argv.index("--socket") + 1]))
        if "/runs/" in cwd and os.path.basename(cwd.split("/runs/")[0]).startswith("claimgrid-"):
            out.add(cwd.split("/runs/")[0])
    return out


@pytest.mark.parametrize(
    "isolation, sig", [("warm", signal.SIGINT), ("fresh", signal.SIGINT), ("fresh", signal.SIGKILL)]
)
def test_stop_mid_grid_then_resume(tmp_path, plain_venvs, isolation, sig):  # noqa: F811
    out = tmp_path / "grid"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--venvs",
            str(plain_venvs),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--isolation",
            isolation,
            "--no-progress",
            *CELLS,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    runs = out / "runs.jsonl"
    members: set[int] = set()
    folders: set[str] = set()
    deadline = time.monotonic() + 240
    # Stop it once some runs are stored and an adapter is in flight.
    while time.monotonic() < deadline and proc.poll() is None:
        members = tree_members(proc.pid) - {proc.pid}
        folders |= _folders_of(members)
        if (
            len(_lines(runs)) >= 2
            and any(
                os.path.basename(os.path.dirname(f)) == "tmp" and os.path.basename(f).startswith("claimgrid-")
                for f in folders
            )
            and len(members) >= 2
        ):
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stdout.read()
    assert folders, "no temporary folder seen"
    t0 = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    else:
        os.kill(proc.pid, signal.SIGKILL)  # the driver only
    try:
        text, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the grid did not stop")
    stopped_s = time.monotonic() - t0
    if sig == signal.SIGINT:
        assert stopped_s < 5, (stopped_s, text[-1500:])
        assert proc.returncode == 130 and "--resume" in text, text[-2000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not all(_gone(p) for p in members) or any(map(os.path.exists, folders))):
        time.sleep(0.1)
    assert [p for p in members if not _gone(p)] == []
    assert [f for f in folders if os.path.exists(f)] == []

    before = {r["run_id"]: r for r in _lines(runs)}
    assert 2 <= len(before) < N_CELLS
    resumed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--resume",
            str(out),
            "--venvs",
            str(plain_venvs),
            "--no-progress",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    after = _lines(runs)
    ids = [r["run_id"] for r in after]
    assert len(ids) == len(set(ids)) == N_CELLS
    assert all(r["classification"]["process"] == "ok" for r in after), [
        (r["run_id"], r["classification"]["process"]) for r in after
    ]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["guard"]["guard"] == "on" and all(r["parity"]["guard"]["guard"] == "on" for r in after)
