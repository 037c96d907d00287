"""The diff's shortcuts: a workspace whose every entry is the fixture's own (path, mode, blob)
is answered without a git process, and a changed one hands git only the blobs the fixture does
not hold; the answer is the one git gives with every blob written: the same file list, patch
and tree id either way. git writes every object (fast-import, update-index, write-tree)."""

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
    """The diff with the shortcuts off: base_tree unknown, every blob handed to git."""
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
            m.setattr(verifier.subprocess, "Popen", functools.partial(_counted, calls, verifier.subprocess.Popen))
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
    "a .git component": lambda ws, f: (
        os.makedirs(ws / "sub" / ".git"),
        open(ws / "sub" / ".git" / "x", "w").write("x"),
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_changed_workspace_is_diffed_by_git_as_before(name, tasks, workspace, monkeypatch):
    task_id = next(iter(tasks))
    template, ws, base = workspace(task_id)
    first = sorted(
        p
        for p in (os.path.relpath(os.path.join(d, n), ws) for d, _, ns in os.walk(ws) for n in ns)
        if not p.startswith(".git")
    )[0]
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


NAMES = [
    b"tab\there.py",
    b'quote"d.py',
    b"new\nline.py",
    b"bad\xff.py",
    b"space name.py",
    b"\\back.py",
    b"a-b",
    b"a.b",
    b"a/b",
    b"a0",
    b"z/deep/er/file",
    b".hidden",
    b".github/workflows/x.yml",
    b".gitmodules",
]


@pytest.mark.parametrize("link", [False, True])
def test_odd_names_and_nesting_make_the_tree_git_makes(link, tasks, workspace, monkeypatch):
    template, ws, base = workspace(next(iter(tasks)))
    root = os.fsencode(ws)
    for raw in NAMES:
        path = os.path.join(root, raw)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if link and raw.endswith(b".gitmodules"):
            os.symlink(b"target", path)  # git's own index refuses this: the harness leaves it to git
        else:
            with open(path, "wb") as fh:
                fh.write(raw + b"\n")
    fast, slow = _both(monkeypatch, template, ws, base)
    _same(fast, slow)
    if not link:
        assert len(fast[0]["files"]) == len(NAMES)


GIT_STEPS = ("fast-import", "update-index", "write-tree", "diff-tree")


def test_a_changed_workspace_takes_one_git_process_per_step(tasks, workspace, monkeypatch):
    template, ws, base = workspace(next(iter(tasks)))
    (ws / "added.txt").write_text("new\n")
    (ws / "second.txt").write_text("also new\n")
    base_tree(template, base)
    calls: list = []
    with monkeypatch.context() as m:
        m.setattr(verifier.subprocess, "Popen", functools.partial(_counted, calls, verifier.subprocess.Popen))
        diff = workspace_diff(template, ws, base, [], {})
    assert [f["path"] for f in diff["files"]] == ["added.txt", "second.txt"]
    assert [next(a for a in argv[0] if a in GIT_STEPS) for argv in calls] == [
        "fast-import",  # both new blobs, one process
        "update-index",
        "write-tree",
        "diff-tree",
        "diff-tree",
    ]


def test_a_blob_git_stores_under_another_id_is_an_error_not_a_diff(tasks, workspace, monkeypatch):
    template, ws, base = workspace(next(iter(tasks)))
    (ws / "added.txt").write_text("new\n")
    base_tree(template, base)
    monkeypatch.setattr(verifier, "_blob_id", lambda data: "0" * 40)
    diff = workspace_diff(template, ws, base, [], {})
    assert diff["files"] is None and "not " + "0" * 40 in diff["error"]
