"""Turn snapshots (claimgrid.verify.snapshots): the workspace of an agent with its own tools
between its model calls, as the harness reads it (no agent code runs)."""

from __future__ import annotations

import os

from claimgrid import caps
from claimgrid.verify.snapshots import TurnSnapshots


def _ws(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / "README.md").write_text("hello\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return ws


def test_each_interval_lists_what_changed_and_an_undone_edit_is_two_changes(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()  # start
    snaps.take(0)  # the first request: nothing ran yet
    (ws / "src" / "a.py").write_text("x = 2\n")  # the tool calls of answer 0
    snaps.take(1)
    (ws / "src" / "a.py").write_text("x = 1\n")  # answer 1's calls put it back
    (ws / "new.txt").write_text("n")
    snaps.take(2)
    (ws / "new.txt").unlink()
    snaps.take()  # exit
    events = snaps.events()
    assert [(e["after_call"], e["before_call"]) for e in events] == [(None, 0), (0, 1), (1, 2), (2, None)]
    assert [e["changed"] for e in events] == [
        [],
        [{"path": "src/a.py", "change": "modified"}],
        [{"path": "new.txt", "change": "added"}, {"path": "src/a.py", "change": "modified"}],
        [{"path": "new.txt", "change": "removed"}],
    ]
    assert [e["changed_n"] for e in events] == [0, 1, 2, 1]
    assert all(e["source"] == "verifier" and e["kind"] == "turn_changes" and e["reason"] is None for e in events)
    # The final state is the start's: a diff of start and exit alone would show nothing.
    assert snaps.snapshots[0].files == snaps.snapshots[-1].files


def test_git_and_interpreter_caches_are_not_changes_as_in_the_verifiers_diff(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (ws / "src" / "__pycache__").mkdir()
    (ws / "src" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    snaps.take(0)
    assert snaps.events()[0]["changed"] == []


def test_same_size_same_second_rewrite_is_seen_by_its_content(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    st = os.stat(ws / "src" / "a.py")
    (ws / "src" / "a.py").write_text("x = 9\n")  # same size
    os.utime(ws / "src" / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))  # modification time set back
    snaps.take(0)
    assert snaps.events()[0]["changed"] == [{"path": "src/a.py", "change": "modified"}]


def test_unchanged_files_are_not_read_again(tmp_path, monkeypatch):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    from claimgrid.verify import snapshots as module

    reads = []
    real = module.read_at
    monkeypatch.setattr(module, "read_at", lambda fd, name, rel, st: reads.append(rel) or real(fd, name, rel, st))
    (ws / "README.md").write_text("changed\n")
    snaps.take(0)
    assert reads == [b"README.md"]


def test_a_snapshot_over_its_cap_is_not_taken_and_both_intervals_say_why(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws, max_read_bytes=100)
    snaps.take()
    (ws / "big.bin").write_bytes(b"x" * 500)  # more new bytes than one snapshot reads
    snaps.take(0)
    (ws / "big.bin").unlink()
    snaps.take()
    first, second = snaps.events()
    for e in (first, second):
        assert e["changed"] is None and e["changed_n"] is None
        assert "TURN_SNAPSHOT_MAX_READ_BYTES" in e["reason"]


def test_a_missing_workspace_is_a_recorded_reason_never_an_exception(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    os.rename(ws, tmp_path / "gone")
    snaps.take()
    (e,) = snaps.events()
    assert e["changed"] is None and "cannot list" in e["reason"]


def test_a_turn_lists_at_most_its_cap_of_paths_and_counts_them_all(tmp_path, monkeypatch):
    monkeypatch.setattr(caps, "TURN_CHANGES_MAX_PATHS", 3)
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    for i in range(5):
        (ws / f"f{i}").write_text(str(i))
    snaps.take(0)
    (e,) = snaps.events()
    assert len(e["changed"]) == 3 and e["changed_n"] == 5 and e["changed_cut"] is True


def test_no_snapshot_after_the_exit_one(tmp_path):
    ws = _ws(tmp_path)
    snaps = TurnSnapshots(ws)
    snaps.take()
    snaps.finish()
    snaps.take(5)  # a request the killed agent left in flight
    assert [s.call for s in snaps.snapshots] == [None, None] and len(snaps.events()) == 1
