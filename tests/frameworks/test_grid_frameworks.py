"""A small real matrix end to end through every framework in venvs.toml.

Runs ``grid.py`` as a user does (real venvs, real adapters, the real gateway with
reference models) and checks the ledger and the classifications against the reference
models' documented behaviour. Per-framework adapter rules (every task, fresh == warm,
faults as results) are tests/frameworks/test_conformance.py's; this is the grid-level check that
all frameworks run together in one grid and one ledger. Its cells are the ones the
conformance runs do not already make on every framework: an injection under each swap; the
conformance runs hold the rest of what a framework does with them (``diligent`` passing every
task, ``narrator`` narration only, a reported swap visible).
"""

import json
import subprocess
import sys

import pytest

from claimgrid.inputs.venvs import default_frameworks, load_venvs
from claimgrid.store.lines import read_runs

from tests.conftest import ROOT

pytestmark = pytest.mark.frameworks

FRAMEWORKS = list(default_frameworks(load_venvs()))  # what a grid without --frameworks runs
TASK = "fix-float-add"


def _grid(out, *args):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "run", "--out", str(out), "--no-progress", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return read_runs(out / "runs.jsonl").values


@pytest.fixture(scope="module")
def warm_grid(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid") / "warm"
    # No --frameworks: the default is every entry of venvs.toml in the default matrix.
    runs = _grid(
        out,
        "--tasks",
        TASK,
        "--content",
        "clean,malicious",
        "--swap",
        "none,reported",
        "--models",
        "diligent",
        "--isolation",
        "warm",
    )
    return out, runs


def test_the_matrix_is_complete_and_the_ledger_written(warm_grid):
    out, runs = warm_grid
    assert len(runs) == len(FRAMEWORKS) * 2 * 2
    assert len({r["run_id"] for r in runs}) == len(runs)
    assert {r["framework"] for r in runs} == set(FRAMEWORKS)
    ledger = (out / "LEDGER.md").read_text()
    for heading in (
        "## 0. Summary",
        "## 2. Headline: swap = none",
        "## 3. Framework divergence",
        "## 4. Swap",
        "## 5. Detector evaluation",
        "## 6. Calibration",
        "## 7. Harness health",
    ):
        assert heading.lower() in ledger.lower(), heading
    for fw in FRAMEWORKS:
        assert fw in ledger
    assert (out / "heatmap.svg").read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert (out / "RUNS.md").is_file() and (out / "ledger.html").is_file()


def test_reference_behaviour_is_classified_in_every_framework(warm_grid):
    _, runs = warm_grid
    cell = {(r["framework"], r["content"], r["swap"], r["model"]): r["classification"] for r in runs}
    for fw in FRAMEWORKS:
        d = cell[(fw, "clean", "none", "diligent")]
        assert (d["process"], d["outcome"], d["claim_vs_outcome"], d["claim_verdict"]) == (
            "ok",
            "PASS",
            "TRUE_SUCCESS",
            "consistent",
        ), (fw, d)
        assert cell[(fw, "malicious", "none", "diligent")]["injection"] == "resisted"
        assert cell[(fw, "malicious", "reported", "diligent")]["injection"] == "resisted"
        # A reported swap to reader is visible to the runtime and turns the builder's DONE false.
        assert cell[(fw, "clean", "reported", "diligent")]["swap"] == "visible"


def test_parity_facts_carry_the_lock(warm_grid):
    """Each framework's parity facts: the lock's hash and the resolved traffic-shaping versions."""
    out, runs = warm_grid
    meta = json.loads((out / "meta.json").read_text())
    for fw in FRAMEWORKS:
        facts = meta["frameworks"][fw]
        assert len(facts["lock_sha256"]) == 64, fw
        for r in runs:
            if r["framework"] == fw:
                assert r["parity"]["framework_versions"] == facts
    # A package every framework's model traffic passes through (pinned or not) is a fact.
    # An agent with its own model client (venvs.toml kind = "cli") has its npm package as that fact.
    entries = load_venvs()
    assert all(
        "openai" in meta["frameworks"][fw]
        or "httpx" in meta["frameworks"][fw]
        or (entries[fw].npm and meta["frameworks"][fw].get(entries[fw].npm[0]) == entries[fw].npm[1])
        for fw in FRAMEWORKS
    )


def test_exports_agree_with_every_frameworks_evidence(warm_grid, tmp_path):
    """Every tool call and model call of every framework's runs, and every verdict, as
    Inspect and OpenTelemetry read the export back."""
    from tests.export_support import check_export_agrees

    out, runs = warm_grid
    counts = check_export_agrees(out, tmp_path)
    assert counts == {"runs": len(runs), "frameworks": len(FRAMEWORKS)}
