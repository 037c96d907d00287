"""Turn snapshots while the agent swaps a workspace folder for a symlink out of it.

The snapshots run as the harness (root, where it is) while the agent is alive. An agent that
exchanges a folder with a symlink to an outside 0700 folder (``renameat2(RENAME_EXCHANGE)``,
atomic) between the walk's listing and its entry must not get the outside folder's names,
sizes or hashes recorded: the walk goes by descriptors (claimgrid.verify.workspace.walk_at)
and that snapshot fails with its reason instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time

import pytest

from claimgrid.verify import snapshots as snapshots_module
from claimgrid.verify import workspace as workspace_module
from claimgrid.verify.snapshots import TurnSnapshots

SECRET = "secret-payroll-2026.txt"
RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _exchange(a, b) -> None:
    """``renameat2(a, b, RENAME_EXCHANGE)``: both names swap in one step."""
    if _libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _layout(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    (outside / SECRET).write_text("salaries\n")
    os.chmod(outside, 0o700)
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "inside.txt").write_text("inside\n")
    (ws / "keep.txt").write_text("k\n")
    (ws / "swap").symlink_to(outside)  # the agent's link, exchanged with d in the race
    return ws, outside


def _leaked(snaps: TurnSnapshots) -> list:
    out = []
    for snap in snaps.snapshots:
        out += [p for p in (snap.files or {}) if SECRET.encode() in p]
        if snap.reason and SECRET in snap.reason:
            out.append(snap.reason)
    return out


@pytest.fixture
def exchange_supported(tmp_path):
    a, b = tmp_path / "probe-a", tmp_path / "probe-b"
    a.mkdir()
    b.symlink_to("x")
    try:
        _exchange(a, b)
    except (OSError, AttributeError) as exc:
        pytest.skip(f"renameat2(RENAME_EXCHANGE) not available here: {exc}")


def test_a_folder_exchanged_for_a_link_between_listing_and_entry_fails_the_snapshot(
    tmp_path, monkeypatch, exchange_supported
):
    """The window made deterministic: the exchange happens right after the walk stat-ed ``d``
    as a folder and before it enters it. A path walk would now list the outside folder."""
    ws, _ = _layout(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    real_stat = workspace_module.os.stat
    swapped = []

    def stat_then_swap(name, *args, **kwargs):
        st = real_stat(name, *args, **kwargs)
        if name == "d" and kwargs.get("dir_fd") is not None and not swapped:
            _exchange(ws / "d", ws / "swap")
            swapped.append(True)
        return st

    monkeypatch.setattr(workspace_module.os, "stat", stat_then_swap)
    snaps.take(0)
    assert swapped, "the exchange did not happen inside the walk"
    assert os.path.islink(ws / "d")  # the link really sat at d when the walk went on
    last = snaps.snapshots[-1]
    assert last.files is None and "changed while it was read" in last.reason
    assert _leaked(snaps) == []


def test_a_file_exchanged_for_a_link_between_its_stat_and_its_read_is_not_followed(
    tmp_path, monkeypatch, exchange_supported
):
    ws, outside = _layout(tmp_path)
    (ws / "f.txt").write_text("mine\n")
    (ws / "flink").symlink_to(outside / SECRET)
    snaps = TurnSnapshots(ws)
    real_read = snapshots_module.read_at

    def swap_then_read(dir_fd, name, rel, st):
        if name == "f.txt":
            _exchange(ws / "f.txt", ws / "flink")
        return real_read(dir_fd, name, rel, st)

    monkeypatch.setattr(snapshots_module, "read_at", swap_then_read)
    snaps.take()
    first = snaps.snapshots[0]
    assert first.files is None and "changed while it was read" in first.reason
    # The hash of the outside file's content is nowhere: nothing outside was read.
    assert _leaked(snaps) == []


def test_a_swap_loop_racing_the_snapshots_never_records_the_outside_folder(tmp_path, exchange_supported):
    """A thread exchanges ``d`` and the link to the outside 0700 folder as fast as it can while
    snapshots are taken: no snapshot holds an outside name, whether it was taken or failed."""
    ws, _ = _layout(tmp_path)
    for i in range(30):  # enough entries that a walk spends time inside d
        (ws / "d" / f"f{i:02}.txt").write_text(str(i))
    stop = threading.Event()
    swaps = 0

    def swapper():
        nonlocal swaps
        while not stop.is_set():
            _exchange(ws / "d", ws / "swap")
            swaps += 1

    snaps = TurnSnapshots(ws)
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    deadline = time.monotonic() + 1.5
    try:
        while time.monotonic() < deadline:
            snaps.take(len(snaps.snapshots))
    finally:
        stop.set()
        thread.join(5)
    taken = [s for s in snaps.snapshots if s.files is not None]
    assert swaps > 100 and len(snaps.snapshots) > 20, (swaps, len(snaps.snapshots))
    assert _leaked(snaps) == []
    # What a snapshot holds is the workspace's own: d's files under d/ or under swap/ (the
    # exchanged name), never anything else.
    for snap in taken:
        assert all(p.split(b"/")[0] in (b"d", b"swap", b"keep.txt") for p in snap.files)
    print(f"race: {swaps} exchanges, {len(snaps.snapshots)} snapshots, {len(taken)} taken, 0 leaked")
