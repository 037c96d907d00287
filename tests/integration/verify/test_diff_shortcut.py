"""The diff's shortcut: a workspace whose every entry is the fixture's own (path, mode, blob)
is answered without a git process, and the answer is the one git gives. Every other
workspace goes through git as before; the file list and tree id are the same either way."""

from __future__ import annotations

import functools
import os

import pytest

from claimgrid.verify import verifier
from claimgrid.verify.verifier import base_tree, workspace_diff


def _counted(calls, run, *args, **kwargs):
    calls.append(args)
    return run(*args, **kwargs)


def _by_git(monkeypatch, template, ws, base):
    """The diff with the shortcut off: base_tree unknown, every blob written, git decides."""
    with monkeypatch.context() as m:
        m.setattr(verifier, "base_tree", lambda *_: None)
        patch: list[str] = []
        view: dict = {}
        return workspace_diff(template, ws, base, patch, view), patch, view


def _both(monkeypatch, template, ws, base):
    patch: list[str] = []
    view: dict = {}
    fast = workspace_diff(template, ws, base, patch, view)
    return (fast, patch, view), _by_git(monkeypatch, template, ws, base)


def _same(a, b):
    (da, pa, va), (db, pb, vb) = a, b
    assert da == db
    assert pa == pb
    assert va["tree"] == vb["tree"]
    assert [rel for rel, _ in va["seen"]] == [rel for rel, _ in vb["seen"]]


def test_every_task_unchanged_is_the_fixture_tree_without_git(tasks, workspace, monkeypatch):
    for task_id in tasks:
        template, ws, base = workspace(task_id)
        base_tree(template, base)  # read once per (template, commit): not part of the run's diff
        calls: list = []
        with monkeypatch.context() as m:
            m.setattr(verifier.subprocess, "run", functools.partial(_counted, calls, verifier.subprocess.run))
            fast = workspace_diff(template, ws, base, [], {})
        assert calls == [], task_id
        assert fast["files"] == [] and fast["empty"] is True, task_id
        _same(_both(monkeypatch, template, ws, base)[0], _by_git(monkeypatch, template, ws, base))


MUTATIONS = {
    "exec bit": lambda ws, f: os.chmod(ws / f, 0o755),
    "renamed, same bytes": lambda ws, f: os.rename(ws / f, ws / (f + ".moved")),
    "removed": lambda ws, f: os.remove(ws / f),
    "one byte added": lambda ws, f: open(ws / f, "ab").write(b"\n"),
    "a symlink in its place": lambda ws, f: (os.remove(ws / f), os.symlink("elsewhere", ws / f)),
    "a copy beside it": lambda ws, f: open(ws / (f + ".copy"), "wb").write((ws / f).read_bytes()),
    "a .git component": lambda ws, f: (os.makedirs(ws / "sub" / ".git"), open(ws / "sub" / ".git" / "x", "w").write("x")),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_changed_workspace_is_diffed_by_git_as_before(name, tasks, workspace, monkeypatch):
    task_id = next(iter(tasks))
    template, ws, base = workspace(task_id)
    first = sorted(p for p in (os.path.relpath(os.path.join(d, n), ws) for d, _, ns in os.walk(ws) for n in ns)
                   if not p.startswith(".git"))[0]
    MUTATIONS[name](ws, first)
    fast, slow = _both(monkeypatch, template, ws, base)
    _same(fast, slow)
    assert fast[0]["files"], name


def test_an_empty_directory_is_no_change(tasks, workspace, monkeypatch):
    template, ws, base = workspace(next(iter(tasks)))
    os.mkdir(ws / "nothing-here")
    fast, slow = _both(monkeypatch, template, ws, base)
    _same(fast, slow)
    assert fast[0]["empty"] is True


def test_a_ref_name_is_not_kept(tasks, workspace):
    template, _, _ = workspace(next(iter(tasks)))
    assert base_tree(template, "HEAD") is None  # only a full commit id names its tree for good
