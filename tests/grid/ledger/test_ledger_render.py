"""The ledger's structure and numbers, checked against counts recomputed independently from
runs.jsonl and the evidence folders of a real grid (tests/ledger_support.py, run once per
session by the ``ledger_grid`` fixture of tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from claimgrid.errors import DataError
from claimgrid.ledger import headline_table, load, render_ledger, wilson
from claimgrid.ledger.heatmap import REDS, red
from claimgrid.ledger.stats import clustered, format_rate, ratio_pct
from claimgrid.store import RunStore
from claimgrid.store.seal import LINE_MEMBER, META_MEMBER

from tests.ledger_support import (
    FRAMEWORKS,
    ROOT,
    classification,
    copy_ledger,
    events,
    headline_row,
    ledger_text,
    records,
    selection,
)

SECTIONS = [
    "0. Summary",
    "1. Design",
    "2. Headline: swap = none",
    "3. Framework divergence",
    "4. Swap",
    "5. Detector evaluation",
    "6. Calibration",
    "7. Harness health",
    "8. Reproducibility",
    "9. Appendix",
]
DERIVED = ("LEDGER.md", "RUNS.md", "ledger.html", "heatmap.svg", "runs.parquet")


@pytest.fixture(scope="module")
def grid(ledger_grid):
    return ledger_grid, records(ledger_grid), ledger_text(ledger_grid)


def section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    end = md.find("\n## ", start + 1)
    return md[start : end if end > 0 else None]


def summary_line(md: str, prefix: str) -> str:
    return next(line for line in section(md, "0. Summary").splitlines() if line.startswith(f"- {prefix}"))


def half_up_pct(k: int, n: int) -> str:
    return f"{(200 * k + n) // (2 * n)}%"  # integer half-up, independent of the ledger's Decimal code


def one_framework(recs):
    return [r for r in recs if r["framework"] == FRAMEWORKS[0]]


# ---- statistics ---------------------------------------------------------------------


def test_rounding_is_half_up_and_intervals_only_when_asked():
    assert ratio_pct(2, 16) == "13%" and ratio_pct(6, 16) == "38%" and ratio_pct(1, 8) == "13%"
    assert format_rate(2, 16, False) == "2/16 · 13%"
    assert format_rate(3, 10) == "3/10 · 30% (11–60%)"
    assert format_rate(0, 0) == "–"
    lo, hi = wilson(3, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.1078, 0.6032)
    with pytest.raises(ValueError):
        wilson(4, 3)


def test_task_clustered_interval():
    # p = 8/20; cluster residuals (5 - 4, 3 - 4) -> var = 2/1 * 2 / 400 = 0.01, sd 0.1
    lo, hi = clustered([(5, 10), (3, 10)])
    assert (round(lo, 4), round(hi, 4)) == (round(0.4 - 0.196, 4), round(0.4 + 0.196, 4))
    assert clustered([(5, 10), (0, 10)])[0] == 0.0  # clipped to [0, 1]
    assert clustered([(5, 10)]) is None  # one cluster: no between-cluster variance


# ---- structure and the first screen --------------------------------------------------


def test_sections_in_order_and_first_table_early(grid):
    _, _, md = grid
    positions = [md.index(f"## {s}") for s in SECTIONS]
    assert positions == sorted(positions)
    first_table = md.index("\n|")
    assert md[:first_table].count("\n") < 40  # the summary and design come first, no dict dump before
    retries = md.index("Runtime settings")
    assert retries > md.index("## 9. Appendix")  # raw versions() dicts live in the appendix


def test_summary_false_success_sentence_recomputed(grid):
    folder, recs, md = grid
    clean = selection()["content"][0]
    base = [r for r in one_framework(recs) if r["swap"] == "none" and r["content"] == clean]
    # One bullet per model group, "v1 model, model; v2 model": each model under the value
    # recomputed here (fault and probe models are one counted finding: their table is above).
    values = {}
    summary = md[md.index("## 0. Summary") : md.index("## 1. Design")]
    for line in summary.splitlines():
        if not line.startswith("- **False success**") or "blocks" in line:
            continue
        text = re.split(r"models(?: \([^)]*\))?: ", line, maxsplit=1)[1].rstrip(".")
        for part in text.split("; "):
            if re.search(r" for \d+ ", part):
                continue  # a counted group: more names than a bullet lists
            value, labels = re.match(r"^(\d+/\d+|– \([^)]*\)) (.+)$", part).groups()
            values.update({m: value for m in labels.split(", ")})
    from claimgrid.ledger.kinds import model_kind

    assert {m for m in selection()["models"] if model_kind(m) == "behaviour"} <= set(values)
    for model in values:
        runs = [r for r in base if r["model"] == model]
        k = sum(r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS" for r in runs)
        n = sum(r["classification"]["claim_vs_outcome"] in ("TRUE_SUCCESS", "FALSE_SUCCESS") for r in runs)
        if n:
            assert values[model] == f"{k}/{n}"
        else:  # nothing claimed: "–" with what the framework did instead, never 0/0
            assert values[model].startswith("– (nothing claimed: ")
    # diligent never claims falsely without a swap (the "blames the wrong model").
    assert re.match(r"0/\d+$", values["diligent"])


def test_summary_detector_sentence_recomputed(grid):
    _, recs, md = grid
    runs = one_framework(recs)
    fs = [r for r in runs if r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS"]
    ts = [r for r in runs if r["classification"]["claim_vs_outcome"] == "TRUE_SUCCESS"]
    flagged = lambda rs: sum(r["classification"]["claim_verdict"] not in ("consistent", "UNKNOWN") for r in rs)
    row = next(line for line in section(md, "5. Detector evaluation").splitlines() if line.startswith("| all tasks |"))
    assert f"| {flagged(fs)}/{len(fs)} · {half_up_pct(flagged(fs), len(fs))} |" in row
    assert f"| {flagged(ts)}/{len(ts)} · {half_up_pct(flagged(ts), len(ts))} |" in row
    # the first screen splits the same claims by what the check can see (the reference truth of each report)
    stated = [r for r in fs + ts if "claim_verdict" in (r.get("truth") or {})]
    mis = [r for r in stated if r["truth"]["claim_verdict"] != "consistent"]
    assert f"misreported successes caught {flagged(mis)}/{len(mis)}" in summary_line(md, "**Claim check**")


def test_frameworks_identical_is_stated_and_true(grid):
    _, recs, md = grid
    by_cell = {}
    for r in recs:
        key = (r["task"], r["content"], r["swap"], r["model"], r["repeat"])
        by_cell.setdefault(key, []).append(json.dumps(r["classification"], sort_keys=True))
    assert all(len(set(v)) == 1 and len(v) == len(FRAMEWORKS) for v in by_cell.values())
    assert f"identical in all {len(by_cell)} cells" in section(md, "3. Framework divergence")
    # per-framework calls / tokens / time are shown for each framework
    div = section(md, "3. Framework divergence")
    for fw in FRAMEWORKS:
        assert re.search(rf"^\| {re.escape(fw)} \| {len(recs) // len(FRAMEWORKS)} \| ", div, re.M)


def goal_met_in_clean(folder, rec, check) -> bool:
    """The task's attacker-goal check on a clean run, read straight from its verifier events."""
    ev = events(folder, rec)
    if check.kind == "review_verdict":
        return next(e for e in ev if e["source"] == "verifier" and e["kind"] == "review")["verdict"] == check.value
    if check.kind in ("file_exists", "path_changed"):
        diff = next(e for e in ev if e["source"] == "verifier" and e["kind"] == "diff")
        return any(f["path"] == check.path for f in diff["files"])
    raise AssertionError(f"no independent reading for check kind {check.kind}")


def test_paired_attack_success(grid):
    from claimgrid.inputs.tasks import load_tasks

    folder, recs, md = grid
    tasks = load_tasks()
    clean, attack = selection()["content"]
    head = section(md, "2. Headline: swap = none")
    base = {
        (r["task"], r["model"], r["repeat"]): r
        for r in one_framework(recs)
        if r["swap"] == "none" and r["content"] == clean
    }
    for model in selection()["models"]:
        runs = [
            r for r in one_framework(recs) if r["swap"] == "none" and r["model"] == model and r["content"] == attack
        ]
        reached = [
            r
            for r in runs
            if r["classification"]["injection"] in ("followed", "resisted") and r["classification"]["process"] == "ok"
        ]
        paired = pairs = clean_met = 0
        for r in reached:
            goal = next(e for e in events(folder, r) if e["source"] == "verifier" and e["kind"] == "attacker_goal")
            match = base[(r["task"], r["model"], r["repeat"])]
            if goal_met_in_clean(folder, match, tasks[r["task"]].spec.attacker_goal.check):
                clean_met += 1  # the clean run already meets the goal: no effect can be seen, left out
                continue
            pairs += 1
            paired += bool(goal["achieved"])
        row = headline_row(head, model, FRAMEWORKS[0])
        assert row is not None, model
        if not runs:  # never attacked: in the clean-only table, without the attack columns
            assert len(row) == 4, row
            continue
        got = row[5]  # the first paired column
        if not reached:
            assert got == f"– ({len(runs)} not reached)"
            continue
        if not pairs:
            assert got == f"– ({clean_met} clean run already met it)"
            continue
        assert got.startswith(f"{paired}/{pairs} ")
        assert ("left out: " + f"{clean_met} clean run already met it" in got) == bool(clean_met)
        if model != "obedient":
            assert paired == 0  # the "done when": only obedient follows injected goals
    obedient = next(line for line in head.splitlines() if line.startswith("| obedient |"))
    assert re.search(r"\| [1-9]\d*/\d+ · ", obedient)


def test_untreated_and_noop_swaps_are_listed_not_counted(grid):
    folder, recs, md = grid
    sel = selection()
    sub_swap = sel["swap"][1]
    sw = section(md, "4. Swap")
    for fw in FRAMEWORKS:
        never = [
            r
            for r in recs
            if r["framework"] == fw
            and r["swap"] == sub_swap
            and r["model"] != sel["substitute"]
            and not any(e["source"] == "gateway" and e.get("swap") not in (None, "none") for e in events(folder, r))
        ]
        noop = [r for r in recs if r["framework"] == fw and r["swap"] == sub_swap and r["model"] == sel["substitute"]]
        assert never and noop  # the selection makes both happen (narrator makes one model call)
        for model in {r["model"] for r in never}:
            k = sum(r["model"] == model for r in never)
            assert re.search(rf"- not reached: {model} under {sub_swap} on {fw}, {k} runs", sw)
        assert f"- no-op (substitute = assigned): {sel['substitute']} under {sub_swap} on {fw}, {len(noop)} runs" in sw


def test_false_success_is_attributed_to_the_report_writer(grid):
    folder, recs, md = grid
    sub_swap = selection()["swap"][1]
    fired = [r for r in one_framework(recs) if r["swap"] == sub_swap and r["model"] == "diligent"]
    writers = {}
    for r in fired:
        if r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS":
            served = [e for e in events(folder, r) if e["source"] == "gateway" and e["status"] == 200]
            last = max(served, key=lambda e: e["call_index"])["served_model"]
            writers[last] = writers.get(last, 0) + 1
    row = next(
        line
        for line in section(md, "4. Swap").splitlines()
        if line.startswith(f"| {sub_swap} | diligent |") and re.search(r"\| [\w-]+: \d+ \|$", line)
    )
    for w, k in writers.items():
        assert f"{w}: {k}" in row


# ---- per-run pages, html, reclassify ---------------------------------------------------


def test_run_md_cites_the_evidence_lines(grid):
    folder, recs, _ = grid
    rec = next(r for r in recs if r["classification"]["claim_verdict"] == "narration only")
    text = (folder / rec["evidence_dir"] / "RUN.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| claim_verdict |"))
    assert "narration only" in row and "0 tool calls" in row
    lines = [int(n) for n in re.findall(r"events.jsonl#L(\d+)", row)]
    ev = (folder / rec["evidence_dir"] / "events.jsonl").read_text().splitlines()
    assert lines and json.loads(ev[lines[0] - 1])["source"] == "agent"
    # RUN.md is derived: not in the manifest, and the manifest still checks out.
    manifest = json.loads((folder / rec["evidence_dir"] / "manifest.json").read_text())["sha256"]
    assert "RUN.md" not in manifest
    assert RunStore(folder).verify_manifest(rec["run_id"]) == []


def test_html_is_self_contained_and_holds_every_run(grid):
    folder, recs, _ = grid
    html = (folder / "ledger.html").read_text()
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", html)  # no CDN, no network
    assert "<script src" not in html and "<link" not in html
    data = json.loads(
        re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
        .group(1)
        .replace("<\\/", "</")
    )
    assert sorted(r[0] for r in data["runs"]) == sorted(r["run_id"] for r in recs)
    assert set(data["pages"]) == {r["run_id"] for r in recs}


def _snapshot(folder):
    files = {name: (folder / name).read_bytes() for name in DERIVED}
    for rec in records(folder):
        files[rec["run_id"]] = (folder / rec["evidence_dir"] / "RUN.md").read_bytes()
    return {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}


SVG = "{http://www.w3.org/2000/svg}"
CLAIMS = ("TRUE_SUCCESS", "FALSE_SUCCESS")


def heatmap_cells(folder) -> dict:
    """heatmap.svg's cells: (panel, row, column) -> (fill, text lines)."""
    root = ET.parse(folder / "heatmap.svg").getroot()
    assert root.tag == SVG + "svg", root.tag
    return {
        (g.get("data-panel"), g.get("data-row"), g.get("data-col")): (
            g.find(SVG + "rect").get("fill"),
            [t.text for t in g.iter(SVG + "tspan")],
        )
        for g in root.iter(SVG + "g")
        if g.get("class") == "cell"
    }


def test_heatmap_cells_are_the_records_counts(grid):
    """Every swap = none cell of the picture says the false successes among claims that
    runs.jsonl gives for its model and content, coloured on the fixed 0-100% scale, and
    every fault model has a cell per framework; LEDGER.md shows the picture."""
    folder, recs, md = grid
    assert "](heatmap.svg)" in md and not (folder / "heatmap.png").exists()
    cells = heatmap_cells(folder)
    runs = one_framework(recs)  # frameworks are identical here: one row per model, its first framework's runs
    behaviour = sorted({r["model"] for r in runs if not (r.get("faults") or {}).get("fault")})
    rated = 0
    for model in behaviour:
        for content in sorted({r["content"] for r in runs}):
            fill, text = cells[("none", model, content)]
            sel = [r for r in runs if (r["model"], r["content"], r["swap"]) == (model, content, "none")]
            claimed = [r for r in sel if r["classification"]["claim_vs_outcome"] in CLAIMS]
            false = sum(r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS" for r in claimed)
            if not sel:
                assert text == ["not run"], (model, content, text)
            elif not claimed:
                assert text[0] == "no claim" and fill != red(0.0), (model, content, text, fill)
            else:
                assert text == [f"{false}/{len(claimed)}", half_up_pct(false, len(claimed))], (model, content, text)
                assert fill == red(false / len(claimed)), (model, content, fill)
                rated += 1
    assert rated and {red(0.0), red(1.0)} == {REDS[0], REDS[-1]}
    faults = {r["model"] for r in runs if (r.get("faults") or {}).get("fault")}
    assert faults and {(m, f) for (p, m, f) in cells if p == "fault"} == {(m, f) for m in faults for f in FRAMEWORKS}


def test_reclassify_rerenders_byte_identical(grid, tmp_path):
    folder = copy_ledger(grid[0], tmp_path / "g")
    render_ledger(folder)
    before = _snapshot(folder)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "reclassify", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "0 changed" in proc.stdout
    assert _snapshot(folder) == before


def test_reclassify_of_an_older_ledger_renders_the_new_structure(grid, tmp_path):
    """A ledger as a release before swap facts, hashes and seals wrote it (unsealed: no seal
    in meta.json or on any line) is reclassified into today's structure."""
    folder = copy_ledger(grid[0], tmp_path / "old")
    meta = json.loads((folder / "meta.json").read_text())
    for key in ("swap_conditions", "hashes", "seal", META_MEMBER):
        meta.pop(key, None)
    (folder / "meta.json").write_text(json.dumps(meta))
    old = records(folder)
    for r in old:
        r["parity"].pop("swap_from_call", None)
        r.pop(LINE_MEMBER, None)
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    for name in ("ledger.html", "LEDGER.md", "RUNS.md", "heatmap.svg"):
        (folder / name).unlink()
    (folder / "heatmap.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # the picture as an older release drew it
    for r in old:
        (folder / r["evidence_dir"] / "RUN.md").unlink()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "reclassify", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "not sealed" in proc.stderr, proc.stderr  # a reader refuses a downgrade
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "reclassify", str(folder), "--allow-unsealed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    md = ledger_text(folder)
    assert all(f"## {s}" in md for s in SECTIONS)
    assert "not recorded in meta.json: read from today's conditions/" in md
    assert (folder / "ledger.html").exists() and all((folder / r["evidence_dir"] / "RUN.md").exists() for r in old)
    assert (folder / "heatmap.svg").is_file() and not (folder / "heatmap.png").exists()


def test_divergent_cell_is_listed_and_frameworks_split(grid, tmp_path):
    folder = copy_ledger(grid[0], tmp_path / "div")
    recs = records(folder)
    target = next(
        r
        for r in recs
        if r["framework"] == FRAMEWORKS[1]
        and r["model"] == "diligent"
        and r["swap"] == "none"
        and r["classification"]["outcome"] == "PASS"
    )
    target["classification"]["outcome"] = "TESTS_FAIL"
    target["classification"]["claim_vs_outcome"] = "FALSE_SUCCESS"
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    render_ledger(folder)
    md = ledger_text(folder)
    div = section(md, "3. Framework divergence")
    assert "1 of " in div and "cells where frameworks' classifications differ" in div
    cell = " · ".join(str(target[k]) for k in ("task", "content", "swap", "model", "repeat"))
    row = next(line for line in div.splitlines() if line.startswith(f"| {cell} |"))
    assert f"outcome: {FRAMEWORKS[0]} PASS, {FRAMEWORKS[1]} TESTS_FAIL" in row
    head = section(md, "2. Headline: swap = none")
    own = [headline_row(head, "diligent", fw) for fw in FRAMEWORKS]
    assert [r[1] for r in own] == list(FRAMEWORKS), own  # one row each: diligent differs by framework
    assert headline_row(head, "obedient", FRAMEWORKS[0])[1].startswith("all 2 frameworks (identical in all")
    # The picture splits the same row: one per model · framework, the changed run counted in its own.
    cells = heatmap_cells(folder)
    rows = {row for (panel, row, _) in cells if panel == "none"}
    assert {f"diligent · {fw}" for fw in FRAMEWORKS} <= rows and "diligent" not in rows and "obedient" in rows


# ---- bad and partial input -------------------------------------------------------------


def test_bad_line_is_one_clear_error(tmp_path):
    (tmp_path / "runs.jsonl").write_text('{"run_id": "r1"}\n{"x": 1}\n')
    # The store's one reader types every line: the error names the line and the field.
    with pytest.raises(DataError, match=r"runs.jsonl:1: field 'framework': Field required"):
        render_ledger(tmp_path)
    (tmp_path / "runs.jsonl").write_text("not json\n{}\n")
    with pytest.raises(DataError, match=r"runs.jsonl:1: not valid JSON"):
        render_ledger(tmp_path)


def test_empty_and_evidence_less_ledgers(tmp_path, grid):
    (tmp_path / "empty").mkdir()
    assert "No run has completed yet" in render_ledger(tmp_path / "empty").read_text()
    assert headline_table(tmp_path / "empty") == "No runs in this ledger yet."
    # A complete record with no evidence folder, no timings and no meta.json: still rendered.
    rec = {
        "run_id": "r1",
        "framework": "x",
        "task": "t",
        "content": "clean",
        "swap": "none",
        "model": "diligent",
        "classification": classification(outcome="UNKNOWN", claim_vs_outcome="FALSE_SUCCESS"),
    }
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "runs.jsonl").write_text(json.dumps(rec) + "\n")
    led = load(tmp_path / "bare")
    row = led.runs.row(0, named=True)
    assert row["outcome"] == "UNKNOWN" and row["evidence"] is False and row["calls"] is None
    md = render_ledger(tmp_path / "bare").read_text()
    assert "meta.json is missing" in md and "1 runs present (planned size unknown)" in md
    # A line without a field every release writes is not a record: one error naming it.
    del rec["classification"]["outcome"]
    (tmp_path / "bare" / "runs.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError, match=r"runs.jsonl:1: field 'classification.outcome': Field required"):
        render_ledger(tmp_path / "bare")


def test_no_winner_language(grid):
    md = grid[2].lower()
    for word in ("winner", "best", "worst", "rank"):
        assert word not in md


def test_parity_groups_split_the_headline(grid, tmp_path):
    folder = copy_ledger(grid[0], tmp_path / "par")
    recs = records(folder)
    for r in recs:
        if r["task"] == selection()["tasks"][0]:
            r["parity"]["timeout_s"] = 60.0  # as if a resumed grid had run this task with a shorter timeout
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    md = render_ledger(folder).read_text()
    head = section(md, "2. Headline: swap = none")
    assert "Split by parity group: 2 groups" in head
    clean = selection()["content"][0]
    for task in selection()["tasks"]:
        runs = [
            r
            for r in one_framework(recs)
            if r["task"] == task and r["swap"] == "none" and r["content"] == clean and r["model"] == "narrator"
        ]
        fs = sum(r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS" for r in runs)
        claimed = sum(r["classification"]["claim_vs_outcome"] in ("TRUE_SUCCESS", "FALSE_SUCCESS") for r in runs)
        group = "timeout_s 60.0" if task == selection()["tasks"][0] else "timeout_s 120.0"
        row = next(line for line in head.splitlines() if group in line and "| narrator |" in line)
        assert f"| {format_rate(fs, claimed, False)} |" in row
    assert "These runs form 2 parity groups" in section(md, "0. Summary")


def _minimal_ledger(folder, model, repeats):
    """Records only (no evidence): two tasks x two repeats of one framework on clean content."""
    folder.mkdir()
    recs = []
    for task, outcomes in (("t1", ["PASS", "PASS"]), ("t2", ["PASS", "TESTS_FAIL"])):
        for rep, outcome in enumerate(outcomes[:repeats]):
            recs.append(
                {
                    "run_id": f"fw.{task}.{rep}",
                    "framework": "fw",
                    "task": task,
                    "content": "clean",
                    "swap": "none",
                    "model": model,
                    "repeat": rep,
                    "classification": classification(
                        outcome=outcome,
                        claimed=True,
                        claim_vs_outcome="TRUE_SUCCESS" if outcome == "PASS" else "FALSE_SUCCESS",
                    ),
                }
            )
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "meta.json").write_text(json.dumps({"repeats": repeats, "models": [model], "grid_size": len(recs)}))
    return render_ledger(folder).read_text()


def test_intervals_only_for_sampled_stochastic_cells(tmp_path):
    stochastic = "someprovider/some-model"  # a LiteLLM model string: not a reference model
    md = _minimal_ledger(tmp_path / "s", stochastic, repeats=2)
    row = next(
        line for line in section(md, "2. Headline: swap = none").splitlines() if line.startswith(f"| {stochastic} |")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    # utility on clean content pooled over two tasks (3/4): the task is the cluster
    assert cells[2] == format_rate(3, 4, clustered([(2, 2), (1, 2)]))
    assert "95% Wilson per cell" in section(md, "1. Design")
    # one repeat: no interval, even for a stochastic model
    md1 = _minimal_ledger(tmp_path / "s1", stochastic, repeats=1)
    row1 = next(
        line for line in section(md1, "2. Headline: swap = none").splitlines() if line.startswith(f"| {stochastic} |")
    )
    assert "(" not in row1.split("|")[3]
    # a deterministic reference model: "each cell is one outcome", never an interval
    ref = selection()["models"][0]
    mdr = _minimal_ledger(tmp_path / "r", ref, repeats=2)
    rowr = next(line for line in section(mdr, "2. Headline: swap = none").splitlines() if line.startswith(f"| {ref} |"))
    assert "(" not in rowr.split("|")[3] and "deterministic: each cell is one outcome" in mdr


def test_budget_stop_and_provider_health_are_shown(ledger_grid, tmp_path):
    """A grid stopped at its budget says so before the summary; provider retries and
    failures per model are in harness health (meta.json written by the real-model path)."""
    folder = copy_ledger(ledger_grid, tmp_path / "budget")
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["stopped_at_budget"] = {
        "limit": "max_cost_usd",
        "max_cost_usd": 0.5,
        "max_tokens": None,
        "cost_usd": 0.5012,
        "tokens": 123456,
        "cost_complete": False,
        "unpriced_models": ["local/x"],
        "runs_done": 7,
        "runs_not_started": 9,
        "at": "2026-11-30T00:00:00+00:00",
    }
    meta["spend"] = {
        "providers": {"openai/gpt-x": {"calls": 40, "retries": 3, "failures": 1}},
        "unpriced_models": ["local/x"],
    }
    meta_path.write_text(json.dumps(meta))
    render_ledger(folder)
    md = (folder / "LEDGER.md").read_text()
    first_screen = md.split("## 0. Summary")[0]
    assert (
        "**Stopped at budget** (max_cost_usd): spent $0.5012 and 123,456 tokens; 7 runs done, 9 not started"
        in first_screen
    )
    assert "(cost covers priced calls only)" in first_screen
    health = section(md, "7. Harness health")
    assert "| openai/gpt-x | 40 | 3 | 1 |" in health
    assert "No price known for: `local/x`" in health


def test_fault_table_lists_every_fault_model_per_framework(grid):
    folder, recs, md = grid
    faulted = {}
    for r in recs:
        f = r.get("faults") or {}
        if f.get("fault"):
            faulted.setdefault(f["fault"], set()).add(r["framework"])
    assert faulted, "the default models include fault models; the grid ran none"
    div = section(md, "3. Framework divergence")
    assert "### What each framework does with a fault" in div
    for fault in faulted:
        row = next(line for line in div.splitlines() if line.startswith(f"| {fault} |"))
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert len(cells) == len(FRAMEWORKS) and all(c != "–" for c in cells)
        reactions = Counter(
            r["faults"]["reaction"]
            for r in recs
            if (r.get("faults") or {}).get("fault") == fault and r["framework"] == FRAMEWORKS[0]
        )
        shown = cells[0].split(" · ")[0].split("; ")
        assert sorted(shown) == sorted(f"{k}: {v}" for k, v in reactions.items())


def test_task_table_shows_provenance(ledger_grid, tmp_path):
    from claimgrid.inputs.tasks import load_tasks

    folder = copy_ledger(ledger_grid, tmp_path / "prov")
    meta = json.loads((folder / "meta.json").read_text())
    tasks = load_tasks()
    real = next(t for t in tasks.values() if t.provenance())
    task = meta["tasks"][0]
    meta["task_provenance"] = {task: real.provenance()}  # as if the grid's first task came from upstream
    (folder / "meta.json").write_text(json.dumps(meta))
    render_ledger(folder)
    design = section((folder / "LEDGER.md").read_text(), "1. Design")
    row = next(line for line in design.splitlines() if line.startswith(f"| {task} |"))
    assert real.provenance()["repository"] in row and real.provenance()["license"] in row
