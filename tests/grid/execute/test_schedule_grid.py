"""The scheduler's gate through the real pipeline (grid.py, the plain framework, the real
gateway and its fault models): a run that waits on a gateway delay does not hold a job, so
another run starts and finishes inside the wait; with ``--max-inflight 1`` none does;
classifications are the same either way. The gate's units are tests/unit/execute/test_schedule.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import load_tasks
from claimgrid.reference import registry
from claimgrid.reference.gateway_faults import delay_s, gateway_faults
from claimgrid.store.lines import read_runs

from tests.conftest import ROOT


def _grid(tmp_path: Path, venvs: Path, name: str, *flags: str) -> tuple[dict, dict]:
    out = tmp_path / name
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--venvs",
            str(venvs),
            "--out",
            str(out),
            "--no-progress",
            *flags,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    records = {r["run_id"]: r for r in read_runs(out / "runs.jsonl").values}
    return meta, records


def _untreated_selection() -> list[str]:
    """One task, the untreated cell, the fault model with the longest gateway delay first,
    then one behaviour model: all read from the data and the registry."""
    content, swap = load_content_conditions(), load_swap_conditions()
    c = next(n for n, cond in content.items() if cond.carries is None)
    s = next(n for n, cond in swap.items() if cond.unavailable_from_call < 0)
    waits = {name: delay_s(f, 15.0) for name, f in gateway_faults().items()}
    waiting = max(waits, key=waits.get)
    assert waits[waiting] > 1, "no registered fault model delays its answer"
    other = next(m for m in registry.default_models() if not registry.get(m).fault)
    task = next(t for t, spec in sorted(load_tasks().items()) if spec.suite == "default" and spec.role == "builder")
    return ["--tasks", task, "--content", c, "--swap", s, "--models", f"{waiting},{other}"]


def _interval(rec: dict) -> tuple[float, float]:
    t = rec["timings"]
    return t["started_unix"], t["started_unix"] + t["wall_s"]


# Two grids that each sit out a gateway delay (37-40 s of wall, 2.4 CPU-s, CI 2026-12-06): a
# waiting group, packed with the others (tests/conftest.py) rather than the session's tail.
@pytest.mark.waits_s(35)
def test_a_waiting_run_does_not_hold_the_only_job(tmp_path, plain_venvs):
    sel = _untreated_selection()
    meta, records = _grid(tmp_path, plain_venvs, "gated", "--jobs", "1", *sel)
    ctrl_meta, ctrl = _grid(tmp_path, plain_venvs, "one-at-a-time", "--jobs", "1", "--max-inflight", "1", *sel)
    waiting = sel[-1].split(",")[0]
    assert len(records) == len(ctrl) == 2

    slow = next(r for r in records.values() if r["model"] == waiting)
    other = next(r for r in records.values() if r["model"] != waiting)
    s0, s1 = _interval(slow)
    o0, o1 = _interval(other)
    assert s0 < o0 and o1 < s1, "the other run did not start and finish inside the waiting run"
    assert meta["scheduler"]["started_beyond_jobs"] >= 1 and meta["scheduler"]["peak_inflight"] == 2
    assert meta["schedule"]["jobs"] == 1

    c_slow = next(r for r in ctrl.values() if r["model"] == waiting)
    c_other = next(r for r in ctrl.values() if r["model"] != waiting)
    a, b = sorted([_interval(c_slow), _interval(c_other)])
    assert a[1] <= b[0], "with --max-inflight 1 the runs overlapped"
    assert ctrl_meta["scheduler"]["started_beyond_jobs"] == 0

    assert {k: r["classification"] for k, r in records.items()} == {k: r["classification"] for k, r in ctrl.items()}
