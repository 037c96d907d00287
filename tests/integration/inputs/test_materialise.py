"""A workspace copy (materialise) is the template as ``shutil.copytree`` copied it, made
writable: the same entries, bytes, link targets, exec bits and times, every folder and file
writable; checked against the sealed template's digest as it is copied, and a template
changed since it was sealed leaves no workspace behind."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from claimgrid.inputs.tasks import TemplateTampered, build_template, materialise, seal_template


def _entries(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, open(path, "rb").read())
    return out


def _made_writable_by_copytree(template, dest):
    """What materialise did before it copied and checked in one pass."""
    shutil.copytree(template, dest, symlinks=True)
    for dirpath, _dirnames, filenames in os.walk(dest):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o777 if os.stat(path).st_mode & 0o100 else 0o666)


def test_every_task_is_copied_as_copytree_copied_it(tasks, tmp_path):
    for task in tasks.values():
        template = tmp_path / f"t-{task.id}"
        build_template(task, task.slot_text(), template)
        (template / "bin").mkdir()
        (template / "bin" / "run.sh").write_text("#!/bin/sh\n")
        (template / "bin" / "run.sh").chmod(0o755)
        os.symlink("run.sh", template / "bin" / "link")
        os.symlink("bin", template / "dirlink")
        digest = seal_template(template)
        ours, theirs = tmp_path / f"ours-{task.id}", tmp_path / f"theirs-{task.id}"
        materialise(template, ours, digest)
        _made_writable_by_copytree(template, theirs)
        assert _entries(ours) == _entries(theirs), task.id
        assert stat.S_IMODE(os.lstat(ours).st_mode) == 0o777


def test_a_changed_template_leaves_no_workspace(tasks, tmp_path):
    task = next(iter(tasks.values()))
    template = tmp_path / "t"
    build_template(task, task.slot_text(), template)
    digest = seal_template(template)
    target = template / task.spec.content_slot
    target.chmod(0o644)
    target.write_text(target.read_text() + "changed\n")
    with pytest.raises(TemplateTampered, match="changed since it was built"):
        materialise(template, tmp_path / "ws", digest)
    assert not (tmp_path / "ws").exists()


def test_an_existing_destination_is_left_alone(tasks, tmp_path):
    task = next(iter(tasks.values()))
    template = tmp_path / "t"
    build_template(task, task.slot_text(), template)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "keep").write_text("x")
    with pytest.raises(FileExistsError):
        materialise(template, tmp_path / "ws", seal_template(template))
    assert (tmp_path / "ws" / "keep").read_text() == "x"
