"""The one read-back helper (frameworks/_harness/harness_shared/readback.py, which the driver
imports too): a file an agent could have replaced is read only as itself.

Each way of pointing the read elsewhere is tried with openat2 and with the per-component
fallback (the kernel without openat2): a symlink as the file or as any folder on the way, a
hardlink, a FIFO (an open that would never return), a socket, a folder, a file over the limit,
one of another owner, a path that leaves its folder. Each is a refusal naming what was there,
and the bytes behind it are never returned.
"""

from __future__ import annotations

import os
import socket
import threading

import pytest

from frameworks._harness.harness_shared import readback

SECRET = b"HOST-ONLY-SECRET"


@pytest.fixture(params=["openat2", "per-component"])
def mode(request, monkeypatch):
    if request.param == "per-component":
        monkeypatch.setattr(readback, "_has_openat2", False)
    else:
        monkeypatch.setattr(readback, "_has_openat2", None)
    return request.param


@pytest.fixture
def home(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    (vault / "secret").write_bytes(SECRET)
    home = tmp_path / "home"
    home.mkdir()
    (home / "sub").mkdir()
    (home / "sub" / "report.txt").write_bytes(b"the agent's report")
    return home


def _refused(got, reason: str):
    assert isinstance(got, readback.Refusal), got
    assert reason in got.reason and SECRET.decode() not in str(got), got
    return got


def test_a_regular_file_is_read_and_a_missing_one_is_none(home, mode):
    assert readback.read_back(str(home), "sub/report.txt", "final report") == b"the agent's report"
    assert readback.read_back(str(home), "nothing.txt", "final report") is None
    assert readback.read_back(str(home / "gone"), "x", "final report") is None


def test_a_symlink_as_the_file_or_on_the_way_is_refused(home, mode):
    os.symlink(home.parent / "vault" / "secret", home / "last.txt")
    got = _refused(readback.read_back(str(home), "last.txt", "final report"), "symlink")
    assert str(got) == "final report not a regular file: symlink"
    os.symlink(home.parent / "vault", home / "linked")
    _refused(readback.read_back(str(home), "linked/secret", "final report"), "symlink")
    os.symlink("sub", home / "rel")  # even one that stays inside
    _refused(readback.read_back(str(home), "rel/report.txt", "final report"), "symlink")


def test_a_hardlink_a_fifo_a_socket_a_folder_are_refused(home, mode):
    os.link(home.parent / "vault" / "secret", home / "hard.txt")
    _refused(readback.read_back(str(home), "hard.txt", "trajectory"), "hardlink")
    os.mkfifo(home / "fifo.txt")
    done = threading.Event()
    result = {}

    def read():
        result["got"] = readback.read_back(str(home), "fifo.txt", "trajectory")
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "a FIFO blocked the read-back"
    _refused(result["got"], "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(home / "sock.txt"))
    _refused(readback.read_back(str(home), "sock.txt", "trajectory"), "socket")
    sock.close()
    _refused(readback.read_back(str(home), "sub", "trajectory"), "directory")


def test_size_owner_and_escapes_are_refused(home, mode):
    (home / "big.txt").write_bytes(b"x" * 101)
    _refused(readback.read_back(str(home), "big.txt", "trajectory", limit=100), "over the 100-byte limit")
    assert readback.read_back(str(home), "big.txt", "trajectory", limit=101) == b"x" * 101
    _refused(readback.read_back(str(home), "big.txt", "trajectory", owner=os.geteuid() + 1), "owned by uid")
    for rel in ("../vault/secret", "/etc/passwd", "sub/../../vault/secret", "", "sub//report.txt"):
        _refused(readback.read_back(str(home), rel, "trajectory"), "leaves its folder")
