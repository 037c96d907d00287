"""The ledger's numbers, checked against counts computed independently from the records."""

from __future__ import annotations

import json
import re

import pytest

from claimgrid.errors import DataError
from claimgrid.ledger import headline_table, load, render_ledger, wilson
from claimgrid.ledger.stats import format_rate
from .ledger_synthetic import write_synthetic_ledger
from claimgrid.reference_truth import expected_claim_verdict


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """One synthetic grid, rendered once (rendering draws a PNG): (folder, records)."""
    folder = tmp_path_factory.mktemp("ledger") / "grid"
    records = write_synthetic_ledger(folder)
    render_ledger(folder)
    return folder, records


def test_wilson_known_values():
    lo, hi = wilson(3, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.1078, 0.6032)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0
    assert wilson(0, 0) is None
    assert format_rate(0, 0) == "–"
    assert format_rate(3, 10) == "3/10 · 30% (11–60%)"
    with pytest.raises(ValueError):
        wilson(4, 3)


def section(text: str, number: int) -> str:
    start = text.index(f"## {number}. ")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def group_block(text: str, label: str) -> str:
    start = text.index(f"**{label}**")
    end = text.find("\n**", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_false_success_cell_matches_records(ledger):
    folder, records = ledger
    md = (folder / "LEDGER.md").read_text()
    # narrator on strands under clean content, first parity group of narrator (timeout 120)
    cell = [r for r in records if (r["model"], r["framework"], r["content"]) == ("narrator", "strands", "clean")]
    fs = sum(r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS" for r in cell)
    claimed = sum(r["classification"]["claim_vs_outcome"] in ("TRUE_SUCCESS", "FALSE_SUCCESS") for r in cell)
    assert claimed > 0
    block = group_block(section(md, 1), "P3: model narrator · timeout_s 120")
    row = next(line for line in block.splitlines() if line.startswith("| strands |"))
    first_cell = row.split("|")[2]
    assert first_cell.strip().startswith(format_rate(fs, claimed))
    assert f"all runs: {format_rate(fs, len(cell))}" in first_cell


def test_parity_groups_are_not_pooled(ledger):
    folder, records = ledger
    md = (folder / "LEDGER.md").read_text()
    s1 = section(md, 1)
    assert "Split into 4 tables" in s1
    short = [r for r in records if r["parity"]["timeout_s"] == 60]
    assert len(short) == 4
    block60 = group_block(s1, "P2: model diligent · timeout_s 60")
    block120 = group_block(s1, "P1: model diligent · timeout_s 120")
    # The 60 s group holds exactly its own runs: one per content cell on strands.
    assert "| strands | 0/1 · 0% (0–79%)" in block60
    assert "langgraph" not in block60
    # The 120 s group's strands/clean cell excludes the 60 s run.
    strands120 = [r for r in records if r["parity"]["timeout_s"] == 120 and r["model"] == "diligent"
                  and r["framework"] == "strands" and r["content"] == "clean"]
    claimed = sum(r["classification"]["claim_vs_outcome"] in ("TRUE_SUCCESS", "FALSE_SUCCESS") for r in strands120)
    row = next(line for line in block120.splitlines() if line.startswith("| strands |"))
    assert row.split("|")[2].strip().startswith(format_rate(0, claimed))
    # The by-model table breaks down by model, so model does not split it; timeout still does.
    s5 = section(md, 5)
    assert "**timeout_s 120** (" in s5 and "**timeout_s 60** (4 runs)" in s5


def test_confusion_matrix_counts(ledger):
    folder, records = ledger
    md = (folder / "LEDGER.md").read_text()
    block = group_block(section(md, 7), "timeout_s 120")
    # Only unswapped runs: under a swap a second model finishes the run.
    ref = [r for r in records if r["parity"]["timeout_s"] == 120 and r["swap"] == "none"]
    assert any(r["swap"] != "none" for r in records if r["parity"]["timeout_s"] == 120)
    def expected(r):
        return expected_claim_verdict(r["model"], r.get("role") or {
            "fix-float-add": "builder", "nothing-to-fix": "builder",
            "review-change": "reviewer", "write-status": "reporter"}[r["task"]])
    header = next(line for line in block.splitlines() if line.startswith("| expected \\ classified"))
    cols = [c.strip() for c in header.strip("|").split("|")][1:]
    matched = 0
    for line in block.splitlines():
        m = re.match(r"\| (consistent|narration only|read-only imposture|over-claimed evidence) \|", line)
        if not m:
            continue
        counts = [int(c) for c in line.strip("|").split("|")[1:]]
        for col, got in zip(cols, counts):
            want = sum(1 for r in ref if expected(r) == m.group(1) and r["classification"]["claim_verdict"] == col)
            assert got == want, (m.group(1), col)
        matched += 1
    assert matched == 4  # every expectation row was checked
    # diligent's nothing-to-fix false positive is listed and attributed to seed 001.
    fp = sum(1 for r in ref if r["model"] == "diligent" and r["task"] == "nothing-to-fix"
             and r["classification"]["claim_verdict"] == "read-only imposture")
    assert fp > 0
    assert f"classified “read-only imposture” in {fp} run(s) — seed 001's admitted false positive" in block
    # Per-model agreement: UNKNOWN is not counted as agreement or disagreement.
    dil = [r for r in ref if r["model"] == "diligent" and r["classification"]["claim_verdict"] != "UNKNOWN"]
    agree = sum(r["classification"]["claim_verdict"] == "consistent" for r in dil)
    assert f"| diligent | {format_rate(agree, len(dil))} |" in block


def test_swap_claim_after_refused_swap(ledger):
    folder, records = ledger
    md = (folder / "LEDGER.md").read_text()
    block = group_block(section(md, 4), "P4: model reader · timeout_s 120")
    cell = [r for r in records if r["model"] == "reader" and r["framework"] == "crewai"
            and r["swap"] == "bound" and r["classification"]["swap"] == "prevented"
            and r["classification"]["claim_vs_outcome"] != "UNKNOWN"]
    k = sum(r["classification"]["claim_vs_outcome"] in ("TRUE_SUCCESS", "FALSE_SUCCESS") for r in cell)
    row = next(line for line in block.splitlines() if line.startswith("| crewai | bound |"))
    assert format_rate(k, len(cell)) in row


def test_incomplete_grid_and_runs_md(ledger):
    folder, records = ledger
    md = (folder / "LEDGER.md").read_text()
    assert f"{len(records)} of 292 planned runs present; {292 - len(records)} not present" in md
    assert "truncated" in md
    runs_md = (folder / "RUNS.md").read_text()
    rows = [line for line in runs_md.splitlines() if line.startswith("| [r-")]
    assert len(rows) == len(records)
    rid = records[0]["run_id"]
    assert f"[{rid}](runs/{rid}/)" in runs_md
    assert (folder / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](heatmap.png)" in md


def test_no_winner_language(ledger):
    folder, _ = ledger
    md = (folder / "LEDGER.md").read_text().lower()
    for word in ("winner", "best", "worst", "rank"):
        assert word not in md.replace("do not rank", "")
    assert "**0/" not in md and "**1" not in md  # no bolded cell


def test_missing_optional_fields_read_as_not_recorded(tmp_path):
    rec = {"run_id": "r1", "framework": "strands", "task": "fix-float-add", "content": "clean",
           "swap": "none", "model": "diligent", "classification": {"claim_vs_outcome": "FALSE_SUCCESS"}}
    (tmp_path / "runs.jsonl").write_text(json.dumps(rec) + "\n")
    led = load(tmp_path)
    row = led.runs.row(0, named=True)
    assert row["outcome"] == "not recorded" and row["claimed"] is True and row["swap_mentioned"] is None
    md = render_ledger(tmp_path).read_text()
    assert "1 runs present (planned size unknown)" in md
    assert "meta.json is missing" in md


def test_bad_line_is_one_clear_error(tmp_path):
    (tmp_path / "runs.jsonl").write_text('{"run_id": "r1"}\n{"x": 1}\n')
    with pytest.raises(DataError, match=r"runs.jsonl:1: field 'framework': missing"):
        render_ledger(tmp_path)
    (tmp_path / "runs.jsonl").write_text('not json\n{}\n')
    with pytest.raises(DataError, match=r"runs.jsonl:1: not valid JSON"):
        render_ledger(tmp_path)


def test_empty_ledger_and_headline(tmp_path, ledger):
    (tmp_path / "empty").mkdir()
    assert "No run has completed yet" in render_ledger(tmp_path / "empty").read_text()
    assert headline_table(tmp_path / "empty") == "No runs in this ledger yet."
    from rich.console import Console
    console = Console(width=200, record=True)
    console.print(headline_table(ledger[0]))
    text = console.export_text()
    assert "P2: model diligent · timeout_s 60" in text and "0/1 · 0% (0–79%)" in text
