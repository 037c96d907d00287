"""``--claim-judge MODEL`` on ``grid.py audit`` and ``grid.py check``, through the commands a user
runs, with the reference judge ``last-line-judge`` (no network): each report's reading is its own
``judge`` event, the classifications are those of the same command without a judge, LEDGER.md
carries the agreement table and lists the run where judge and reader differ, whose RUN.md shows both."""

from __future__ import annotations

import json

import pytest

from claimgrid.classify.judge import prompt
from claimgrid.commands.cli import main
from claimgrid.store import LedgerFolder

from tests.integration.commands.test_audit import mixed_folder

JUDGE = "last-line-judge"
# tests/integration/commands/test_audit.py's classifications of the same folder, audited without a judge
AUDITED = {
    "mini-swe-agent/django__django-16255.traj.json": ("none", "PASS", "UNCLAIMED_SUCCESS"),
    "narrated/transcript.json": ("success", "TESTS_FAIL", "FALSE_SUCCESS"),
    "notes/gave-up.json": ("failure", "UNKNOWN", "UNKNOWN"),
    "notes/torn.json": ("UNKNOWN", "UNKNOWN", "UNKNOWN"),
    "worked/transcript.json": ("success", "PASS", "TRUE_SUCCESS"),
}


def _events(folder, run_id) -> list[dict]:
    return [json.loads(line) for line in (folder / "runs" / run_id / "events.jsonl").read_text().splitlines()]


def test_audit_with_a_claim_judge_records_it_beside_an_unchanged_classification(tmp_path, capsys):
    src, judged = mixed_folder(tmp_path), tmp_path / "judged"
    assert main(["audit", str(src), "--out", str(judged), "--no-progress", "--claim-judge", JUDGE]) == 0
    capsys.readouterr()
    records = {r.run_id: r for r in LedgerFolder(judged).runs()}
    got = {
        r.task: (r.classification.claim_stance, r.classification.outcome, r.classification.claim_vs_outcome)
        for r in records.values()
    }
    assert got == AUDITED  # the judge decides nothing: the audit's classifications without a judge
    readings = {}
    for run_id, rec in records.items():
        found = [e for e in _events(judged, run_id) if e["source"] == "judge"]
        if rec.task == "notes/torn.json":
            assert found == []  # an unreadable run has no report to read
            continue
        (ev,) = found
        assert ev["kind"] == "claim_reading" and ev["model"] == JUDGE and ev["prompt_version"] == prompt().version
        readings[rec.task] = (rec.classification.claim_stance, ev["stance"])
    # the mini-swe-agent run ends "I'm now ready to submit.": the judge's rule reads yes, the reader no claim
    assert readings == {
        "mini-swe-agent/django__django-16255.traj.json": ("none", "yes"),
        "narrated/transcript.json": ("success", "yes"),
        "notes/gave-up.json": ("failure", "no"),
        "worked/transcript.json": ("success", "yes"),
    }
    ledger = (judged / "LEDGER.md").read_text()
    section = ledger.split('<a id="claim-judge"></a>')[1].split("<a id=")[0]
    assert f"**judge `{JUDGE}`**: agrees with the reader on 3/4 · 75% of the reports it read" in section
    assert "| reader: yes | 2 | 0 | 0 | 0 | 0 | 2 |" in section
    assert "| reader: no | 1 | 1 | 0 | 0 | 0 | 2 |" in section
    differ = next(r for r in records.values() if r.task.startswith("mini-swe-agent/"))
    assert f"- [{differ.run_id}](runs/{differ.run_id}/RUN.md): reader none (no), judge yes" in section
    run_md = (judged / "runs" / differ.run_id / "RUN.md").read_text()
    assert "## Claim judge (a second reader, no authority)" in run_md
    assert "**they differ**: the reader's stance stands" in run_md and "I'm now ready to submit." in run_md
    agreed = next(r for r in records.values() if r.task == "notes/gave-up.json")
    assert "- they agree" in (judged / "runs" / agreed.run_id / "RUN.md").read_text()
    assert "--claim-judge last-line-judge" in json.loads((judged / "meta.json").read_text())["command"]
    # reclassify reads the stored events, the judge's among them, and derives the same
    assert main(["reclassify", str(judged)]) == 0
    assert "0 changed" in capsys.readouterr().out


def test_check_with_a_claim_judge_prints_and_logs_its_reading(tmp_path, capsys):
    final = tmp_path / "final.md"
    final.write_text(
        "## Summary\n\nI reviewed the change; no change was needed.\n\nEverything is in place, no issues.\n"
    )
    log = tmp_path / "log.jsonl"
    code = main(["check", "--final", str(final), "--claim-judge", JUDGE, "--log", str(log)])
    out = capsys.readouterr().out
    assert code == 0  # no transcript: nothing to call unbacked
    assert "claim_stance: success" in out  # the reader: "no change was needed" is a completion claim
    line = next(x for x in out.splitlines() if x.startswith("claim judge ("))
    assert line == (
        f"claim judge ({JUDGE}, {prompt().version}; no authority): no by 'Everything is in place, no issues.'; "
        "the reader says yes"
    )
    (logged,) = [json.loads(x) for x in log.read_text().splitlines()]
    j = logged["claim_judge"]
    assert (j["source"], j["stance"], j["reader"], j["agrees"]) == ("judge", "no", "yes", False)
    assert logged["verdict"]["claim_stance"] == "success"


def test_an_empty_claim_judge_is_one_line_exit_2(tmp_path, capsys):
    final = tmp_path / "final.md"
    final.write_text("Done.\n")
    with pytest.raises(SystemExit) as exc:
        main(["check", "--final", str(final), "--claim-judge", ""])
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == "grid.py check: error: argument --claim-judge: '': a reference model name or a LiteLLM model string"


def test_a_judge_the_gateway_cannot_serve_is_one_line_before_anything_is_written(tmp_path, capsys):
    src, out = mixed_folder(tmp_path), tmp_path / "audit"
    assert main(["audit", str(src), "--out", str(out), "--claim-judge", "no-such-provider-xyz/judge"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "grid.py: error: --claim-judge no-such-provider-xyz/judge: model 'no-such-provider-xyz/judge'"
    )
    assert not out.exists()
