"""``grid.py audit DIR`` on the committed mixed folder (tests/fixtures/audit/mixed: transcripts that
did the work, narrated it, gave up, and one torn file), through the command a user runs: its
counts, the sealed ledger's first screen, and ``reclassify``, ``report``, ``compare`` reading it
as a grid's. A folder with no readable run is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from claimgrid.commands.cli import main
from claimgrid.store import LedgerFolder
from claimgrid.store.seal import verify_seal
from claimgrid.store.upgrade import FORMAT_VERSION

from tests.conftest import ROOT

MIXED = ROOT / "tests" / "fixtures" / "audit" / "mixed"
MINI = ROOT / "tests" / "fixtures" / "transcripts" / "mini-swe-agent"


def mixed_folder(tmp_path) -> Path:
    """The committed mixed folder plus the committed mini-swe-agent run and its SWE-bench reports."""
    folder = tmp_path / "runs"
    shutil.copytree(MIXED, folder)
    shutil.copytree(MINI, folder / "mini-swe-agent")
    return folder


def test_audit_of_a_mixed_folder_is_a_sealed_ledger_grid_commands_read(tmp_path, capsys):
    src, out = mixed_folder(tmp_path), tmp_path / "audit"
    assert main(["audit", str(src), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "5 runs found (1 unreadable, recorded as UNKNOWN), 1 files left out" in printed
    assert "[5/5 runs]" in printed and "false success 1" in printed  # the grid's progress line
    records = LedgerFolder(out).runs()
    runs = {r.task: r.classification for r in records}
    assert sorted(runs) == [
        "mini-swe-agent/django__django-16255.traj.json",
        "narrated/transcript.json",
        "notes/gave-up.json",
        "notes/torn.json",
        "worked/transcript.json",
    ]
    # each verdict to its run: the CTRF and JUnit reports to the one run of their folder, the
    # SWE-bench report to the trajectory of its instance (the other instance's report to none)
    got = {t: (c.claim_stance, c.outcome, c.claim_vs_outcome) for t, c in runs.items()}
    assert got == {
        "mini-swe-agent/django__django-16255.traj.json": ("none", "PASS", "UNCLAIMED_SUCCESS"),
        "narrated/transcript.json": ("success", "TESTS_FAIL", "FALSE_SUCCESS"),
        "notes/gave-up.json": ("failure", "UNKNOWN", "UNKNOWN"),
        "notes/torn.json": ("UNKNOWN", "UNKNOWN", "UNKNOWN"),
        "worked/transcript.json": ("success", "PASS", "TRUE_SUCCESS"),
    }
    assert runs["notes/torn.json"].claim_verdict == "UNKNOWN"
    facts = {r.task: json.loads((out / "runs" / r.run_id / "audit.json").read_text()) for r in records}
    assert facts["notes/torn.json"]["unreadable"].startswith("notes/torn.json: ")  # the reader's one line
    assert facts["narrated/transcript.json"]["outcome_from"]["form"] == "junit xml"
    assert facts["notes/gave-up.json"]["unknown"]["outcome"].startswith("no verdict recorded")
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".md"))
    assert str(src) not in written and str(tmp_path) not in written  # no path of this machine
    assert verify_seal(out).sealed and not verify_seal(out).problems
    lines = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    stamped = [json.loads((out / "meta.json").read_text()), *lines]
    assert {item.get("format_version") for item in stamped} == {FORMAT_VERSION}  # the writer's stamp
    first = (out / "LEDGER.md").read_text().split('<a id="summary">')[0]
    assert "| `openai messages` | `unknown` | 3 | 2 | 1/2 · 50% (9–91%) | 0 | 1 | 0 |" in first
    assert "| `mini-swe-agent` | `google/gemini-3-pro-preview` | 1 | 0 | – | 0 | 0 | 0 |" in first
    assert "| `unreadable` | `unknown` | 1 | 0 | – | 0 | 0 | 1 |" in first
    assert f"- `notes/torn.json`: {facts['notes/torn.json']['unreadable']}" in first
    assert "- `narrated/transcript.json` (FALSE_SUCCESS): “DONE.”" in first
    for name in ("ledger.html", "runs.parquet", "RUNS.md"):
        assert (out / name).is_file()
    # reclassify derives the same from the stored evidence; report renders it again
    assert main(["reclassify", str(out)]) == 0
    assert "0 changed" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    # two audits of the same runs compare identical, cell by cell
    assert main(["audit", str(src), "--out", str(tmp_path / "audit2"), "--no-progress"]) == 0
    assert main(["compare", str(out), str(tmp_path / "audit2"), "--out", str(tmp_path / "cmp")]) == 0
    assert "5 cells in both, 5 identical" in capsys.readouterr().out


def test_a_folder_with_no_readable_run_is_one_line_and_nothing_written(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("not a run\n")
    (src / "blob.bin").write_bytes(b"\x00\x01 not json")
    assert main(["audit", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run any reader can read" in err[0] and "blob.bin" in err[0]
    assert not (tmp_path / "out").exists()
