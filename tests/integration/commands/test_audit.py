"""``grid.py audit DIR`` on the committed mixed folder (tests/fixtures/audit/mixed: transcripts that
did the work, narrated it, gave up, and one torn file), through the command a user runs: its
counts, the sealed ledger's first screen, and ``reclassify``, ``report``, ``compare`` reading it
as a grid's. A folder with no readable run is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil

from claimgrid.commands.cli import main
from claimgrid.store import LedgerFolder
from claimgrid.store.seal import verify_seal

from tests.conftest import ROOT

MIXED = ROOT / "tests" / "fixtures" / "audit" / "mixed"


def test_audit_of_a_mixed_folder_is_a_sealed_ledger_grid_commands_read(tmp_path, capsys):
    out = tmp_path / "audit"
    assert main(["audit", str(MIXED), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "4 runs found (1 unreadable, recorded as UNKNOWN), 1 files left out" in printed
    assert "[4/4 runs]" in printed  # the grid's progress line
    runs = {r.task: r.classification for r in LedgerFolder(out).runs()}
    assert sorted(runs) == [
        "narrated/transcript.json",
        "notes/gave-up.json",
        "notes/torn.json",
        "worked/transcript.json",
    ]
    # claims read from each report; no verdict was recorded beside these, so no outcome is guessed
    assert [t for t, c in sorted(runs.items()) if c.claimed] == ["narrated/transcript.json", "worked/transcript.json"]
    assert runs["notes/gave-up.json"].claim_stance == "failure"
    assert all(c.outcome == "UNKNOWN" and c.claim_vs_outcome == "UNKNOWN" for c in runs.values())
    torn = runs["notes/torn.json"]
    assert (torn.claim_verdict, torn.claim_stance) == ("UNKNOWN", "UNKNOWN")
    why = json.loads((out / "runs" / LedgerFolder(out).runs()[2].run_id / "audit.json").read_text())
    assert why["name"] == "notes/torn.json" and "not a transcript in a known form" in why["unreadable"]
    assert str(MIXED) not in (out / "runs.jsonl").read_text() + (out / "LEDGER.md").read_text()
    assert verify_seal(out).sealed and not verify_seal(out).problems
    first = (out / "LEDGER.md").read_text().split('<a id="summary">')[0]
    assert "| `openai messages` | `unknown` | 3 | 2 | – | 0 | 3 | 0 |" in first
    assert "| `unreadable` | `unknown` | 1 | 0 | – | 0 | 0 | 1 |" in first
    assert "- `notes/torn.json`: notes/torn.json: not a transcript in a known form" in first
    assert "- `narrated/transcript.json` (UNKNOWN): “DONE.”" in first
    for name in ("ledger.html", "runs.parquet", "RUNS.md"):
        assert (out / name).is_file()
    # reclassify derives the same from the stored evidence; report renders it again
    assert main(["reclassify", str(out)]) == 0
    assert "0 changed" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    # two audits of the same runs compare identical, cell by cell
    again = tmp_path / "copy"
    shutil.copytree(MIXED, again)
    assert main(["audit", str(again), "--out", str(tmp_path / "audit2"), "--no-progress"]) == 0
    assert main(["compare", str(out), str(tmp_path / "audit2"), "--out", str(tmp_path / "cmp")]) == 0
    assert "4 cells in both, 4 identical" in capsys.readouterr().out


def test_a_folder_with_no_readable_run_is_one_line_and_nothing_written(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("not a run\n")
    (src / "blob.bin").write_bytes(b"\x00\x01 not json")
    assert main(["audit", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run any reader can read" in err[0] and "blob.bin" in err[0]
    assert not (tmp_path / "out").exists()
