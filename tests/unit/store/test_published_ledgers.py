"""The ledgers docs/ publishes (each ``docs/<name>/ledger.tar.xz``, its README says how it was
packed): one sealed ledger folder per archive, packed so the same folder gives the same bytes,
holding only what a ledger folder may hold (claimgrid.store.inert), its seal valid; the files
copied out beside it for reading on the web are the archive's own bytes."""

import tarfile
from pathlib import PurePosixPath

import pytest

from claimgrid import ROOT
from claimgrid.store.inert import LEDGER_DIRS, LEDGER_FILES
from claimgrid.store.seal import verify_seal

ARCHIVES = sorted((ROOT / "docs").glob("*/ledger.tar.xz"))


def test_docs_publishes_ledgers_as_archives_not_as_folders():
    assert ARCHIVES, "docs/ publishes its ledgers as docs/<name>/ledger.tar.xz"
    # A ledger folder tracked whole is thousands of files; its readers refuse any other name
    # beside its data (HAND_CHECK.md, README.md), so a published folder is only ever the archive.
    assert sorted(p.parent for p in (ROOT / "docs").glob("*/runs.jsonl")) == []


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.parent.name)
def test_a_published_archive_is_one_deterministic_sealed_ledger_folder(archive, tmp_path):
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        top = PurePosixPath(members[0].name)
        assert members[0].isdir() and len(top.parts) == 1, "one ledger folder at the archive's top"
        children: dict[PurePosixPath, list[str]] = {}
        for m in members:
            path = PurePosixPath(m.name)
            assert path.parts[0] == top.name and ".." not in path.parts and not path.is_absolute(), m.name
            assert m.isdir() or m.isfile(), f"{m.name}: only folders and regular files"
            assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), f"{m.name}: owner not normalised"
            assert m.mtime == members[0].mtime, f"{m.name}: mtime not the archive's one"
            if path != PurePosixPath(top):
                children.setdefault(path.parent, []).append(path.name)
        for parent, names in children.items():
            assert names == sorted(names), f"{parent}: names not sorted (tar --sort=name)"
        top_names = set(children[PurePosixPath(top)])
        allowed = (LEDGER_FILES - {".lock"}) | LEDGER_DIRS  # the writer's lock is no part of the ledger
        assert top_names <= allowed, f"not a ledger folder's: {sorted(top_names - allowed)}"
        assert {"meta.json", "runs.jsonl", "LEDGER.md", "runs"} <= top_names
        inside = {name: tar.extractfile(f"{top}/{name}").read() for name in top_names if name != "runs"}
    beside = {p.name for p in archive.parent.iterdir()} & set(inside)
    assert "LEDGER.md" in beside, "the rendered page is copied out for reading"
    for name in sorted(beside):
        assert (archive.parent / name).read_bytes() == inside[name], f"{name} differs from the archive's"
    for name in ("meta.json", "runs.jsonl"):  # the seal covers these two: checked without the evidence
        (tmp_path / name).write_bytes(inside[name])
    report = verify_seal(tmp_path)
    assert report.sealed and report.chained and report.problems == [], report.problems
