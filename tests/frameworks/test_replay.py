"""Record and replay through ``grid.py``.

A small grid with reference models is recorded on every framework in venvs.toml, then
``grid.py replay`` re-executes every run offline against the recording: each framework
must send exactly the recorded requests (every request hash) and every classification
must equal the published one. A tampered recording shows where requests diverge.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from claimgrid.store import RunStore
from claimgrid.store.lines import read_runs
from claimgrid.store.seal import load_key

from tests.conftest import ROOT  # noqa: F401  (the repository root the grid runs in)
from tests.real_models_support import (
    control_conditions,
    exchanges,
    frameworks,
    grid,
    lines,
    meta,
    plain_venvs,
    records,
    substitute_swap,
    two_models,
)

pytestmark = pytest.mark.frameworks


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tasks):
    out = tmp_path_factory.mktemp("replay") / "recorded"
    content, _ = control_conditions()
    p = grid(
        "run",
        "--out",
        str(out),
        "--no-progress",
        "--jobs",
        "2",
        "--frameworks",
        ",".join(frameworks()),
        "--tasks",
        next(iter(tasks)),
        "--content",
        content,
        "--swap",
        substitute_swap(),
        "--models",
        ",".join(two_models()),
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return out


@pytest.mark.deep
def test_replay_reproduces_every_request_hash_and_classification(recorded, tmp_path):
    published = records(recorded)
    assert len(published) == len(frameworks()) * 2
    before = {p.relative_to(recorded): p.read_bytes() for p in recorded.rglob("*") if p.is_file()}

    out = tmp_path / "replayed"
    # No key and no network: the environment carries no provider settings at all.
    p = grid(
        "replay",
        str(recorded),
        "--out",
        str(out),
        "--no-progress",
        env={"OPENAI_API_KEY": "", "OPENAI_API_BASE": "http://127.0.0.1:9/v1"},
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    n = len(published)
    assert f"same requests (every request hash) in {n}/{n}; same classification in {n}/{n}" in p.stdout

    report = json.loads((out / "replay.json").read_text())
    assert report["runs"] == n and report["requests_identical"] == n == report["classifications_identical"]
    replayed = records(out)
    assert set(replayed) == set(published)
    for run_id, rec in published.items():
        assert replayed[run_id]["classification"] == rec["classification"], run_id
        old = [r["request_sha256"] for r in lines(recorded / "runs" / run_id / "gateway.jsonl")]
        new = [r["request_sha256"] for r in lines(out / "runs" / run_id / "gateway.jsonl")]
        assert old == new and len(old) >= 3, run_id  # the swap happens at a later call: several calls
        assert all(e["replay"]["match"] for e in exchanges(out, run_id))
        # The replay served the recorded facts (who served each call), not a model of its own.
        assert [e["served_model"] for e in exchanges(out, run_id)] == [
            e["served_model"] for e in exchanges(recorded, run_id)
        ]
    assert meta(out)["replay_of"]["folder"] == str(recorded)
    assert (out / "REPLAY.md").is_file() and (out / "LEDGER.md").is_file()
    # The published ledger is only read.
    assert {p.relative_to(recorded): p.read_bytes() for p in recorded.rglob("*") if p.is_file()} == before


@pytest.mark.deep
def test_replay_names_the_first_differing_call(tmp_path, tasks):
    """A recording whose call 1 request differs from what the framework sends (as after a
    framework upgrade): the replay says so, run by run, and exits 1."""
    venvs = plain_venvs(tmp_path)
    content, swap = control_conditions()
    src = tmp_path / "src"
    p = grid(
        "run",
        "--venvs",
        str(venvs),
        "--out",
        str(src),
        "--no-progress",
        "--tasks",
        next(iter(tasks)),
        "--content",
        content,
        "--swap",
        swap,
        "--models",
        ",".join(two_models()),
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    tampered = tmp_path / "tampered"
    shutil.copytree(src, tampered)
    run_id = sorted(records(tampered))[0]
    cassette = tampered / "runs" / run_id / "gateway.jsonl"
    rows = lines(cassette)
    assert len(rows) >= 2
    rows[1]["request_sha256"] = "0" * 64
    cassette.chmod(0o644)
    cassette.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # A changed recording that its publisher did not re-seal is refused before any replay.
    p = grid("replay", str(tampered), "--venvs", str(venvs), "--out", str(tmp_path / "refused"), "--no-progress")
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1 and f"run {run_id}: tampered gateway.jsonl" in p.stderr
    assert not (tmp_path / "refused" / "runs.jsonl").exists()
    _reseal_run(tampered, run_id)  # as its publisher would: the replay's own comparison is under test

    out = tmp_path / "replayed"
    p = grid("replay", str(tampered), "--venvs", str(venvs), "--out", str(out), "--no-progress")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"{run_id}: requests differ from call 1" in p.stdout
    report = json.loads((out / "replay.json").read_text())
    row = next(r for r in report["runs_detail"] if r["run_id"] == run_id)
    assert row["requests"]["first_diff"] == 1 and row["classification_match"]
    assert report["requests_identical"] == report["runs"] - 1


def _reseal_run(folder, run_id) -> None:
    """Re-seal ``folder`` with the session's key (the publisher's: tests/conftest.py) after an
    edit to one file of ``run_id``'s evidence: its manifest, its line's evidence_sha256, the lines."""
    folder.joinpath("runs", run_id).chmod(0o755)
    manifest_path = folder / "runs" / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for name in manifest["sha256"]:
        manifest["sha256"][name] = hashlib.sha256((folder / "runs" / run_id / name).read_bytes()).hexdigest()
    manifest_path.chmod(0o644)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    recs = read_runs(folder / "runs.jsonl").values
    for rec in recs:
        if rec["run_id"] == run_id:
            rec["evidence_sha256"] = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    (folder / "runs.jsonl").chmod(0o644)
    RunStore(folder, load_key()).rewrite(recs)


def test_replay_refuses_bad_input_in_one_line(tmp_path):
    p = grid("replay", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "meta.json" in p.stderr
