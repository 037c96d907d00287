"""A warm parent's socket can be bound however deep the temporary folder is: a path longer
than AF_UNIX allows made every run of a framework a crash (a test session inside a test
session, on CI), so the folder moves to /tmp when the path would not fit."""

from __future__ import annotations

import os
import socket
import tempfile

from claimgrid.anybytes import remove_tree
from claimgrid.caps import UNIX_SOCKET_PATH_MAX
from claimgrid.launch.warm import _short_folder


def _bind(folder: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(os.path.join(folder, "sock"))


def test_a_deep_temporary_folder_still_gives_a_bindable_socket(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert len(os.path.join(str(deep), "sock")) > UNIX_SOCKET_PATH_MAX  # the plain path could not be bound
    folder = _short_folder("a-framework-with-a-rather-long-name-for-its-folder")
    try:
        assert len(os.path.join(folder, "sock")) <= UNIX_SOCKET_PATH_MAX
        _bind(folder)
    finally:
        remove_tree(folder)


def test_a_short_temporary_folder_is_used_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = _short_folder("plain")
    try:
        assert os.path.dirname(folder) == str(tmp_path) and os.path.basename(folder).startswith("cg-warm-plain-")
        _bind(folder)
    finally:
        remove_tree(folder)
