"""Hostile runs beside ordinary ones, through grid.py as a user runs it (real gateway, real
``plain`` adapter, real verifier, real guard): the hostile test doubles of
tests/fixtures/hostile_policies.py (a fork bomb, an output flood, a ``<!--<script>`` report,
a lone surrogate in a report, a 1,200-level tree) share a grid with ordinary reference models.
The grid finishes and writes its ledger, every hostile run is recorded, and every ordinary
run's classification equals the same cell's in the session's default-matrix grid, which
ran without them (tests/conftest.py ``default_grid``: the same cells, the same run ids)."""

from __future__ import annotations

import subprocess
import sys

from claimgrid.store.lines import read_runs

from tests.conftest import ROOT, select_runs

POLICIES = ROOT / "tests" / "fixtures" / "hostile_policies.py"
ORDINARY = ["--tasks", "fix-float-add", "--content", "clean", "--swap", "none", "--models", "diligent,narrator"]
HOSTILE = ["fork-bomber", "flooder", "script-report", "surrogate", "deep-tree"]


def test_hostile_runs_change_no_other_result(tmp_path, plain_venvs, default_grid):
    hostile = HOSTILE
    out = tmp_path / "grid"
    models = ORDINARY[-1].split(",") + hostile
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--venvs",
            str(plain_venvs),
            "--out",
            str(out),
            "--policies",
            str(POLICIES),
            "--no-progress",
            "--jobs",
            "4",
            *ORDINARY[:-1],
            ",".join(models),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("meta.json", "runs.jsonl", "LEDGER.md", "ledger.html"):
        assert (out / name).is_file(), name
    runs = read_runs(out / "runs.jsonl").values
    assert sorted(r["model"] for r in runs) == sorted(models)
    control = {r["run_id"]: r["classification"] for r in select_runs(default_grid, ORDINARY)}
    ordinary = {r["run_id"]: r["classification"] for r in runs if r["run_id"] in control}
    assert len(control) == len(ordinary) == 2
    assert ordinary == control
    assert all(r["parity"]["guard"]["resources"]["uid"] for r in runs)  # the mechanism in force is recorded
