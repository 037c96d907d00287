"""The verifier's file list is real paths (git -z), whatever a name holds: tabs, quotes,
newlines, bytes that are not UTF-8. A protected path so named is recognised as protected,
and the diff's paths equal the tool layer's own (both decode names as ``os.fsdecode``).
A tree too deep, or a path past PATH_MAX, is a recorded UNKNOWN, never an exception."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from claimgrid.anybytes import remove_tree
from claimgrid.verify.verifier import FinishedRun, diff_files, verify, workspace_diff

NAMES = [b"tab\there.py", b'quote"d.py', b"new\nline.py", b"bad\xff.py", b"space name.py", b"\\back.py"]


def test_the_file_list_is_the_real_paths(workspace):
    template, ws, base = workspace("fix-float-add")
    for raw in NAMES:
        with open(os.path.join(os.fsencode(ws), raw), "wb") as fh:
            fh.write(b"x\n")
    diff = workspace_diff(template, ws, base)
    assert sorted(f["path"] for f in diff["files"]) == sorted(os.fsdecode(n) for n in NAMES)
    assert all(f["status"] == "A" and f["added"] == 1 for f in diff["files"])


def test_a_protected_path_with_a_tab_is_recognised(tasks, workspace):
    template, ws, base = workspace("fix-float-add")  # protected_paths = ["tests/**"]
    name = os.path.join(os.fsencode(ws), b"tests", b'odd\t"name".py')
    with open(name, "wb") as fh:
        fh.write(b"x\n")
    events = verify(tasks["fix-float-add"], None, FinishedRun(template, ws, base, [], []))
    scope = next(e for e in events if e["kind"] == "scope")
    assert scope["protected_touched"] == ['tests/odd\t"name".py']


@given(st.binary(min_size=1, max_size=30).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")))
def test_any_added_name_is_listed_as_itself(raw):
    # The fixture's own commit is the base; any new name's line in git's -z listing parses back.
    listing = b":000000 100644 " + b"0" * 40 + b" " + b"1" * 40 + b" A\0" + raw + b"\0" + b"1\t0\t" + raw + b"\0"
    assert diff_files(listing) == [{"path": os.fsdecode(raw), "status": "A", "added": 1, "removed": 0}]


def test_a_deep_tree_is_diffed_as_far_as_it_can_be_read(tasks, workspace):
    template, ws, base = workspace("fix-float-add")
    fd = os.open(ws, os.O_RDONLY)
    for name in (b"d", b"e" * 200):  # 300 levels: over MAX_WORKSPACE_DEPTH; 30 x 201: past PATH_MAX
        cur = os.dup(fd)
        for _ in range(300 if name == b"d" else 30):
            os.mkdir(name, dir_fd=cur)
            nxt = os.open(name, os.O_RDONLY, dir_fd=cur)
            os.close(cur)
            cur = nxt
        os.close(cur)
    os.close(fd)
    events = verify(tasks["fix-float-add"], None, FinishedRun(template, ws, base, [], []))
    diff = next(e for e in events if e["kind"] == "diff")
    tests = next(e for e in events if e["kind"] == "tests")
    # What can be read is diffed; the folder past the depth cap and the one past PATH_MAX are
    # listed by path as added, unread: the change is there for the scope check to see.
    assert diff["limit"] is True and "listed by path, not read" in diff["error"]
    listed = [f["path"] for f in diff["files"]]
    assert any(p.startswith("d/") and p.count("/") == 256 for p in listed), listed
    assert any(p.startswith("e" * 200) for p in listed), listed
    assert tests["exit_code"] is not None and tests["passed"] is False, tests  # run (the fix was not made)
    assert remove_tree(ws)
