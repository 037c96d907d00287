"""Sealed ledgers (claimgrid.store.seal): one byte changed in any sealed file or line is named;
a seal removed, a line moved from another grid, a consistent re-hash are refused; the key
stays outside the ledger."""

import hashlib
import json
import os

import pytest

from claimgrid.errors import ClaimgridError
from claimgrid.store import RunStore
from claimgrid.store.seal import load_key, verify_seal


@pytest.fixture
def key(tmp_path):
    return load_key(tmp_path / "keys" / "publisher.pem")


def _grid(folder, key, grid_id="g1", runs=("r1", "r2", "r3")):
    store = RunStore(folder, key)
    store.create({"grid_id": grid_id, "python": "3.11"})
    for run_id in runs:
        store.write_evidence(
            run_id,
            {"events.jsonl": [{"kind": "exit", "text": f"ran {run_id}"}], "diff.patch": f"--- a\n+++ b\n{run_id}\n"},
        )
        store.append({"run_id": run_id, "classification": {"outcome": "PASS", "claim_vs_outcome": "TRUE_SUCCESS"}})
    return store


def _problems(folder):
    return verify_seal(folder).problems + RunStore(folder).check_integrity()


def _flip(path, needle: bytes, line: int | None = None):
    """Change one byte to another letter: the first byte of ``needle`` (on ``line``, 1-based, when
    given), or the byte after it when ``needle`` ends with an opening quote."""
    os.chmod(path, 0o644)
    data = path.read_bytes()
    if line is None:
        at = data.index(needle)
    else:
        start = sum(len(x) + 1 for x in data.split(b"\n")[: line - 1])
        at = data.index(needle, start)
    at += len(needle) if needle.endswith(b': "') else 0
    new = b"X" if data[at : at + 1] != b"X" else b"Y"
    path.write_bytes(data[:at] + new + data[at + 1 :])


def test_a_sealed_grid_verifies_and_names_its_key(tmp_path, key):
    _grid(tmp_path / "g", key)
    report = verify_seal(tmp_path / "g")
    assert report.sealed and report.problems == []
    assert report.fingerprint == key.fingerprint and key.fingerprint in report.line()
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["seal"]["public_key"] == key.public_key
    assert "PRIVATE" not in "".join(p.read_text(errors="replace") for p in (tmp_path / "g").rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "target, needle, line, named",
    [
        ("meta.json", b"3.11", None, "meta.json: signature does not match"),
        ("runs.jsonl", b"PASS", 1, "runs.jsonl line 1 (run r1): signature does not match"),
        ("runs.jsonl", b"TRUE_SUCCESS", 2, "runs.jsonl line 2 (run r2): signature does not match"),
        ("runs.jsonl", b'"line": "', 3, "runs.jsonl line 3 (run r3): signature does not match"),  # the seal itself
        ("runs/r2/manifest.json", b"sha256", None, "runs/r2/manifest.json: signature does not match"),
        ("runs/r1/events.jsonl", b"ran", None, "run r1: tampered events.jsonl"),
        ("runs/r3/diff.patch", b"r3", None, "run r3: tampered diff.patch"),
    ],
)
def test_one_byte_changed_anywhere_is_named(tmp_path, key, target, needle, line, named):
    _grid(tmp_path / "g", key)
    _flip(tmp_path / "g" / target, needle, line)
    problems = _problems(tmp_path / "g")
    assert any(p.startswith(named) for p in problems), problems
    others = [p for p in problems if target.split("/")[-1] not in p and "manifest" not in p]
    assert not others, problems  # nothing else is blamed


def test_a_consistent_rehash_is_refused(tmp_path, key):
    """A forged event with the manifest and the line's evidence_sha256 recomputed."""
    store = _grid(tmp_path / "g", key)
    folder = store.runs_dir / "r2"
    for p in folder.iterdir():
        p.chmod(0o644)
    forged = b'{"kind": "exit", "text": "forged"}\n'
    (folder / "events.jsonl").write_bytes(forged)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"]["events.jsonl"] = hashlib.sha256(forged).hexdigest()
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    (folder / "manifest.json").write_bytes(raw)
    lines = store.runs_path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["evidence_sha256"] = hashlib.sha256(raw).hexdigest()
    lines[1] = json.dumps(rec)  # the old seal kept, over other bytes
    store.runs_path.write_text("\n".join(lines) + "\n")
    problems = _problems(tmp_path / "g")
    assert "runs/r2/manifest.json: signature does not match (changed after sealing)" in problems
    assert any(p.startswith("runs.jsonl line 2 (run r2)") for p in problems), problems
    rec.pop("seal")  # and with the line's seal deleted
    lines[1] = json.dumps(rec)
    store.runs_path.write_text("\n".join(lines) + "\n")
    assert any(p.startswith("runs.jsonl line 2 (run r2): not sealed") for p in _problems(tmp_path / "g"))


def test_a_removed_seal_or_a_line_from_another_grid_is_refused(tmp_path, key):
    _grid(tmp_path / "g", key)
    meta_path = tmp_path / "g" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("seal"), meta.pop("seal_signature")
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")  # an "unsealed" ledger whose lines are sealed
    report = verify_seal(tmp_path / "g")
    assert not report.sealed
    assert len([p for p in report.problems if "meta.json has no seal" in p]) == 3

    _grid(tmp_path / "h", key, grid_id="g2")  # the same publisher's other grid, same run ids
    other = (tmp_path / "h" / "runs.jsonl").read_text().splitlines()
    target = tmp_path / "g3"
    _grid(target, key, grid_id="g3")
    lines = (target / "runs.jsonl").read_text().splitlines()
    lines[0] = other[0]
    (target / "runs.jsonl").write_text("\n".join(lines) + "\n")
    problems = verify_seal(target).problems
    assert any(p.startswith("runs.jsonl line 1 (run r1): signature does not match") for p in problems), problems


def test_the_key_stays_outside_the_ledger(tmp_path, key):
    assert oct(key.path.stat().st_mode & 0o777) == "0o600"
    assert load_key(key.path).public_key == key.public_key  # made once, then read
    with pytest.raises(ClaimgridError, match="inside the ledger folder"):
        load_key(tmp_path / "g" / "k.pem", ledger=tmp_path / "g")
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(ClaimgridError, match=f"--key {bad}: not an unencrypted PEM private key"):
        load_key(bad)


def test_an_unsealed_store_writes_no_seal(tmp_path):
    store = RunStore(tmp_path / "g")
    store.create({"grid_id": "g"})
    store.write_evidence("r1", {"events.jsonl": []})
    store.append({"run_id": "r1", "classification": {}})
    report = verify_seal(tmp_path / "g")
    assert not report.sealed and report.problems == [] and "not sealed" in report.line()


def _finished(folder, key, runs=("r1", "r2", "r3", "r4")):
    """A finished grid: its meta.json written last, planning exactly ``runs``."""
    store = _grid(folder, key, runs=runs)
    store.write_meta(
        store.read_meta() | {"plan": list(runs), "grid_size": len(runs), "finished": "2026-12-04T00:00:00"}
    )
    return store


def _lines(folder):
    return (folder / "runs.jsonl").read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda ls: ls[:1] + ls[2:], "runs.jsonl line 2 (run r3): not at its sealed place (record 2, after run r1)"),
        (lambda ls: ls[:3], "holds 3: line(s) 4 to 4 of the sealed set were removed"),
        (lambda ls: ls[1:], "runs.jsonl line 1 (run r2): not at its sealed place (record 1, after no other)"),
        (lambda ls: [ls[1], ls[0], *ls[2:]], "runs.jsonl line 1 (run r2): not at its sealed place"),
        (lambda ls: [*ls, ls[1]], "runs.jsonl line 5 (run r2): not at its sealed place (record 5, after run r4)"),
        (lambda ls: ls[:2] + [ls[1]] + ls[2:], "runs.jsonl line 3 (run r2): not at its sealed place"),
    ],
)
def test_a_line_removed_added_or_moved_is_named(tmp_path, key, edit, named):
    """The seal covers the set of lines: each line's place, and meta.json's count and plan."""
    _finished(tmp_path / "g", key)
    assert verify_seal(tmp_path / "g").problems == [] and verify_seal(tmp_path / "g").chained
    (tmp_path / "g" / "runs.jsonl").write_bytes(b"".join(edit(_lines(tmp_path / "g"))))
    problems = verify_seal(tmp_path / "g").problems
    assert any(named in p for p in problems), problems


def test_the_set_is_checked_against_meta_and_the_plan(tmp_path, key):
    store = _finished(tmp_path / "g", key)
    meta = store.read_meta()
    store.write_meta(meta | {"plan": ["r1", "r2", "r3", "r5"]})  # the publisher's own meta, re-sealed
    problems = verify_seal(tmp_path / "g").problems
    assert "runs.jsonl record 4 (run r4): not a run of meta.json's plan" in problems, problems
    assert any("finished, but 1 planned run(s) have no line: r5" in p for p in problems), problems
    store.write_meta(meta | {"grid_size": 5})
    assert verify_seal(tmp_path / "g").problems == [
        "meta.json: finished with 4 sealed record(s), but its grid_size is 5"
    ]


def test_an_unfinished_grid_may_grow_but_not_shrink(tmp_path, key):
    """Lines appended after meta.json was written (a grid killed mid-way) extend the chain;
    lines cut below what meta.json sealed are named; a resumed grid re-seals meta.json."""
    store = _grid(tmp_path / "g", key, runs=("r1", "r2"))
    store.write_meta(store.read_meta())  # as --resume does: the two lines are now in meta.json's count
    for run_id in ("r3", "r4"):
        store.write_evidence(run_id, {"events.jsonl": []})
        store.append({"run_id": run_id, "classification": {}})
    assert verify_seal(tmp_path / "g").problems == []
    (tmp_path / "g" / "runs.jsonl").write_bytes(b"".join(_lines(tmp_path / "g")[:3]))
    assert verify_seal(tmp_path / "g").problems == []  # r4 after the last meta.json: as a kill leaves it
    (tmp_path / "g" / "runs.jsonl").write_bytes(b"".join(_lines(tmp_path / "g")[:1]))
    problems = verify_seal(tmp_path / "g").problems
    assert problems == [
        "runs.jsonl (meta.json sealed 2 record(s), the last run r2): holds 1: line(s) 2 to 2 of the sealed set were removed"
    ]


def test_repair_never_deletes_evidence_it_moves_it_aside(tmp_path, key):
    """A folder without a line (a kill's leftover, or the evidence of a removed line) and a torn
    last line are moved into quarantine/<stamp>/ and named, sealed ledger or not."""
    store = _grid(tmp_path / "g", key)
    (tmp_path / "g" / "runs.jsonl").write_bytes(b"".join(_lines(tmp_path / "g")[:2]))
    evidence = (tmp_path / "g" / "runs" / "r3" / "events.jsonl").read_bytes()
    note = RunStore(tmp_path / "g", key).repair()
    assert "moved 1 evidence folder(s) of runs without a line (r3) to quarantine/" in note, note
    assert not (tmp_path / "g" / "runs" / "r3").exists()
    (kept,) = (tmp_path / "g" / "quarantine").glob("*/runs/r3/events.jsonl")
    assert kept.read_bytes() == evidence
    unsealed = RunStore(tmp_path / "u")
    unsealed.create({"grid_id": "u"})
    unsealed.write_evidence("orphan", {"events.jsonl": []})
    unsealed.append({"run_id": "r1"})
    with open(tmp_path / "u" / "runs.jsonl", "ab") as fh:
        fh.write(b'{"run_id": "r2", "cl')  # a kill mid-append
    note = unsealed.repair()
    assert "moved 1 evidence folder(s) of runs without a line (orphan)" in note, note
    assert "dropped a torn last line (line 2, 20 bytes)" in note and "its bytes kept in quarantine/" in note
    assert list((tmp_path / "u" / "quarantine").glob("*/runs/orphan"))
    assert [p.read_bytes() for p in (tmp_path / "u" / "quarantine").glob("*/runs.jsonl")] == [b'{"run_id": "r2", "cl']
    assert store.records()  # the store itself still reads
