"""Where a node's work folder goes (claimgrid.execute.node.work_parent): a tmpfs it can use,
else the temporary folder; TMPDIR, when set, always wins; and the sweep of dead nodes'
folders looks in both places."""

from __future__ import annotations

import os
import tempfile

from claimgrid import caps
from claimgrid.execute import node


def _mounts(tmp_path, line: str):
    path = tmp_path / "mounts"
    path.write_text("/dev/vda / ext4 rw,relatime 0 0\n" + line + "\n")
    return str(path)


def test_a_usable_tmpfs_is_chosen_when_tmpdir_is_unset(tmp_path, monkeypatch):
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.delenv("TMPDIR", raising=False)
    mounts = _mounts(tmp_path, f"tmpfs {shm} tmpfs rw,nosuid,nodev 0 0")
    free = os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize
    monkeypatch.setattr(caps, "WORK_TMPFS_MIN_FREE_BYTES", min(free, 1))
    assert node.work_parent(str(shm), mounts) == str(shm)


def test_anything_else_is_the_temporary_folder(tmp_path, monkeypatch):
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(caps, "WORK_TMPFS_MIN_FREE_BYTES", 1)
    fallback = tempfile.gettempdir()
    for line in (
        f"tmpfs {shm} tmpfs rw,nosuid,nodev,noexec 0 0",  # the agent could not run what it writes
        f"tmpfs {shm} tmpfs ro,nosuid 0 0",
        f"/dev/vdb {shm} ext4 rw 0 0",  # not a memory file system
        "tmpfs /elsewhere tmpfs rw 0 0",  # not mounted there
    ):
        assert node.work_parent(str(shm), _mounts(tmp_path, line)) == fallback, line
    assert (
        node.work_parent(str(tmp_path / "missing"), _mounts(tmp_path, f"tmpfs {tmp_path}/missing tmpfs rw 0 0"))
        == fallback
    )
    mounts = _mounts(tmp_path, f"tmpfs {shm} tmpfs rw 0 0")
    monkeypatch.setattr(caps, "WORK_TMPFS_MIN_FREE_BYTES", 1 << 62)  # not enough free
    assert node.work_parent(str(shm), mounts) == fallback
    monkeypatch.setattr(caps, "WORK_TMPFS_MIN_FREE_BYTES", 1)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the user's (or a test session's) choice
    assert node.work_parent(str(shm), mounts) == tempfile.gettempdir()


def test_dead_nodes_folders_are_swept_from_the_tmpfs_too(tmp_path, monkeypatch):
    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir()
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(node, "work_parent", lambda *a, **k: str(shm))
    dead, fd = node.make_work_dir()
    assert dead.parent == shm
    live, live_fd = node.make_work_dir()
    os.close(fd)  # the dead node's lock is gone with it
    try:
        assert node.sweep_dead() == [str(dead)]
        assert live.is_dir() and not dead.exists()
    finally:
        os.close(live_fd)
