"""A published ledger stands alone: ``report``, ``reclassify``, ``compare``, ``export`` and
``check`` work on a real grid's ledger folder copied to a temporary directory, run from a
working directory outside any checkout, with a copy of the code that has no ``tasks/``, no
``conditions/`` and no ``venvs.toml`` (a machine with the package and the folder only).
``reclassify`` names each classification table that differs from the one the ledger was made
with, and what changed; a record it cannot re-derive keeps its stored classification and says
which fields and why.

The grid: the dependency-free ``plain`` framework, the first builder task of the default suite,
the untreated and the attacker-goal content conditions, the swap condition that never swaps,
and the default behaviour models of the reference registry (all read from the data folders and registry).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimgrid.commands.check import backed
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.ledger.kinds import model_kind
from claimgrid.reference.registry import default_models
from claimgrid.store.seal import LINE_MEMBER, META_MEMBER
from claimgrid.store.upgrade import FORMAT_VERSION

from tests.conftest import ROOT


def _selection() -> list[str]:
    task = next(t.id for t in in_suite(load_tasks(), "default").values() if t.role == "builder")
    content = load_content_conditions().values()
    kinds = [next(c.name for c in content if c.carries == kind) for kind in (None, "attacker_goal")]
    swap = next(s.name for s in load_swap_conditions().values() if s.on_unavailable == "none")
    return [
        "--tasks",
        task,
        "--content",
        ",".join(kinds),
        "--swap",
        swap,
        "--models",
        ",".join(m for m in default_models() if model_kind(m) == "behaviour"),
    ]


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture(scope="module")
def standalone(tmp_path_factory, plain_venvs):
    """(published copy, the original grid, the code-only checkout, a cwd outside both, run)."""
    base = tmp_path_factory.mktemp("standalone")
    grid = base / "grid"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--venvs",
            str(plain_venvs),
            "--out",
            str(grid),
            "--no-progress",
            *_selection(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    checkout = base / "checkout"
    shutil.copytree(ROOT / "claimgrid", checkout / "claimgrid", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "grid.py", checkout / "grid.py")
    # The stdlib package the driver and the adapters share (frameworks/_harness/harness_shared) is
    # part of the driver's code; no framework, task or condition is copied.
    shutil.copytree(
        ROOT / "frameworks" / "_harness" / "harness_shared",
        checkout / "frameworks" / "_harness" / "harness_shared",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for init in ("frameworks/_harness/__init__.py",):
        if (ROOT / init).exists():
            shutil.copy(ROOT / init, checkout / init)
    assert not any((checkout / name).exists() for name in ("tasks", "conditions", "venvs.toml"))
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess:
        env = {"PATH": os.environ["PATH"], "HOME": str(base), "CLAIMGRID_KEY": os.environ["CLAIMGRID_KEY"]}
        return subprocess.run(
            [sys.executable, str(checkout / "grid.py"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    published = base / "published"
    shutil.copytree(grid, published)
    return published, grid, checkout, elsewhere, run


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines() if line.strip()]


def test_report_reclassify_compare_export_check_on_a_copied_folder(standalone):
    published, grid, checkout, elsewhere, run = standalone
    assert not (elsewhere / "tasks").exists() and ROOT not in elsewhere.parents
    before = _tree(published)
    meta = json.loads((published / "meta.json").read_text())
    assert set(meta["classification_tables"]) >= {"claim_words", "rule_texts"}
    assert all(len(t["sha256"]) == 64 and t["entries"] for t in meta["classification_tables"].values())
    assert all("expected_evidence" in f for f in meta["task_facts"].values())
    # Every writer stamps the format version: grid.py run (the grid), reclassify (the copy).
    for folder in (grid, published):
        written = [json.loads((folder / "meta.json").read_text()), *_records(folder)]
        assert {item.get("format_version") for item in written} == {FORMAT_VERSION}, folder

    proc = run("report", str(published))
    assert proc.returncode == 0, proc.stderr
    assert "seal verified" in proc.stdout and "LEDGER.md" in proc.stdout
    assert _tree(published) == before  # the folder alone gives the same files, byte for byte

    stored = {r["run_id"]: r["classification"] for r in _records(published)}
    proc = run("reclassify", str(published))
    assert proc.returncode == 0, proc.stderr
    assert "no such tasks folder" not in proc.stdout + proc.stderr
    assert f"reclassified {len(stored)} runs from stored evidence; 0 changed" in proc.stdout
    assert "tables: claim words, rule texts and vocabulary as the ledger's" in proc.stdout
    assert {r["run_id"]: r["classification"] for r in _records(published)} == stored

    out = elsewhere / "cmp"
    proc = run("compare", str(grid), str(published), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(stored)} identical, 0 changed" in proc.stdout and (out / "compare.md").is_file()

    for fmt in ("inspect", "otel"):
        proc = run("export", str(published), "--format", fmt, "--out", str(elsewhere / fmt))
        assert proc.returncode == 0, proc.stderr
        assert any((elsewhere / fmt).iterdir())

    same = 0
    for rec in _records(published):
        events = published / rec["evidence_dir"] / "events.jsonl"
        proc = run("check", "--transcript", str(events), "--json")
        assert proc.returncode in (0, 1), proc.stderr
        result = json.loads(proc.stdout)
        verdict = result["verdict"]
        # Without the repository the outcome is UNKNOWN, and so is a claim verdict that needs
        # the diff; every other claim verdict is the grid's.
        assert verdict["outcome"] == "UNKNOWN" and "outcome" in result["unknown"]
        assert verdict["claim_verdict"] in (rec["classification"]["claim_verdict"], "UNKNOWN"), rec["run_id"]
        same += verdict["claim_verdict"] == rec["classification"]["claim_verdict"]
        assert (proc.returncode == 1) == (not backed(verdict))
    assert same >= 1


def test_reclassify_names_each_table_that_changed_and_what(standalone, tmp_path):
    published, _, checkout, _, run = standalone
    code = tmp_path / "changed-code"
    shutil.copytree(checkout, code)
    words = code / "claimgrid" / "classify" / "claim_words.toml"
    text = words.read_text()
    lang = text.split("[", 1)[1].split("]", 1)[0]  # the file's first language table
    meta = json.loads((published / "meta.json").read_text())
    first = meta["classification_tables"]["claim_words"]["entries"][f"{lang}.success"][0]
    assert f"success = ['{first}', " in text
    words.write_text(text.replace(f"success = ['{first}', ", "success = ['zzqx', ", 1))
    rules = code / "claimgrid" / "rule_texts.py"
    field, value = next(iter(meta["classification_tables"]["rule_texts"]["entries"])).split("=", 1)
    rules.write_text(rules.read_text() + f"\nRULES[{field!r}][{value!r}] = 'reworded'\n")
    folder = tmp_path / "pub"
    shutil.copytree(published, folder)
    proc = subprocess.run(
        [sys.executable, str(code / "grid.py"), "reclassify", str(folder)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAIMGRID_KEY": os.environ["CLAIMGRID_KEY"]},
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("table: ")]
    cw = next(line for line in lines if line.startswith("table: claim_words "))
    assert f"changes {lang}.success: +'zzqx' -'{first}'" in cw
    rt = next(line for line in lines if line.startswith("table: rule_texts "))
    assert f"changes {field}={value}:" in rt and "'reworded'" in rt
    assert not any(line.startswith("table: vocabulary") for line in lines)
    assert (folder / "reclassify.txt").read_text().startswith("table: ")
    # meta.json now records the tables the classifications were re-derived with
    after = json.loads((folder / "meta.json").read_text())["classification_tables"]
    assert after["claim_words"]["entries"][f"{lang}.success"][0] == "zzqx"


def test_a_field_reclassify_cannot_recompute_is_named_and_kept(standalone, tmp_path):
    """An older, unsealed ledger whose records lack their task's evidence declaration and whose
    meta.json has no task facts: on a machine without tasks/ the stored values are kept."""
    published, _, _, _, run = standalone
    folder = tmp_path / "old"
    shutil.copytree(published, folder)
    meta = json.loads((folder / "meta.json").read_text())
    for key in ("task_facts", "classification_tables", "seal", META_MEMBER):
        meta.pop(key, None)
    (folder / "meta.json").write_text(json.dumps(meta))
    recs = _records(folder)
    for r in recs:
        r.pop(LINE_MEMBER, None)
        r.pop("seal", None)
        r["facts"].pop("expected_evidence", None)
        r["facts"].pop("required_command", None)
        r["classification"]["claim_verdict"] = "consistent"  # what an older classifier said: kept
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    proc = run("reclassify", str(folder), "--allow-unsealed")
    assert proc.returncode == 0, proc.stderr
    assert "meta.json records no classification tables" in proc.stdout
    assert proc.stdout.count("kept: claim_verdict") == len(recs)
    assert f"{len(recs)} kept their stored classification" in proc.stdout
    task = recs[0]["task"]
    assert f"task {task!r} is neither in meta.json task_facts nor in" in proc.stdout
    assert all(r["classification"]["claim_verdict"] == "consistent" for r in _records(folder))
