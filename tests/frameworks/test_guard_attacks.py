"""The guard end to end, through grid.py as a user runs it (real gateway, real adapters,
real verifier, real bwrap):

* a scripted hostile agent (tests/fixtures/frameworks/hostile, never in the default grid)
  attacks the harness through its tools in a grid shared with the ``plain`` framework:
  every attack is refused or recorded, and no other run's classification changes against
  the same cells run without it (read from the session's default-matrix grid on ``plain``,
  tests/conftest.py ``default_grid``, which holds every one of these cells);
* the reference ``diligent`` model's own test command exits 0 inside ``run_command`` on
  every framework in venvs.toml (read from the ``tools`` events);
* ``--guard off`` is stated in one line and recorded; a bad ``--guard`` is one line.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import default_frameworks, load_venvs
from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT, select_runs

pytestmark = pytest.mark.frameworks

HOSTILE = ROOT / "tests" / "fixtures" / "frameworks" / "hostile"
CELLS = [
    "--tasks",
    "fix-float-add,write-status",
    "--content",
    "clean",
    "--swap",
    "none",
    "--models",
    "diligent,narrator",
]


def _venvs(tmp_path, with_hostile: bool):
    text = (
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n'
    )
    if with_hostile:
        text += f'[frameworks.hostile]\npython = "3.11"\nproject = "{HOSTILE}"\nadapter = "{HOSTILE}/adapter.py"\n'
    path = tmp_path / "venvs.toml"
    path.write_text(text)
    return path


def _grid(out, *args):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "run", "--out", str(out), "--no-progress", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return read_runs(out / "runs.jsonl").values, proc.stdout


def _events(out, run):
    return read_events(out / run["evidence_dir"] / "events.jsonl")


@pytest.fixture(scope="module")
def grids(tmp_path_factory, default_grid):
    base = tmp_path_factory.mktemp("attacks")
    attacked, _ = _grid(
        base / "grid", "--venvs", str(_venvs(base, True)), "--frameworks", "hostile,plain", "--jobs", "3", *CELLS
    )
    # Without the hostile framework: CELLS on plain, from the session's default-matrix grid
    # (a superset of them, run with the same default substitute, so the run ids are the same).
    return base / "grid", attacked, select_runs(default_grid, CELLS)


def test_every_attack_is_refused_or_recorded(grids):
    out, attacked, _ = grids
    hostile = [r for r in attacked if r["framework"] == "hostile"]
    assert len(hostile) == 4
    for run in hostile:
        transcript = json.loads((out / run["evidence_dir"] / "transcript.json").read_text())
        text = transcript["final_text"] or ""
        assert text.startswith("HOSTILE "), (run["run_id"], transcript)
        res = json.loads(text[len("HOSTILE ") :])
        for path, answer in {**res["writes"], **res["writes_via_links"]}.items():
            assert answer.startswith("ERROR:") and "outside the workspace" in answer, (path, answer)
        assert "root:" not in res["read_via_link"] and res["read_via_link"].startswith("ERROR:")
        race = res["race"]
        assert race["attempts"] > 20 and "swaps=" in race["swapper"], race
        assert res["token_seen"] is False
        hunt = res["token_hunt"]
        assert "No such file" in hunt and 'outcome.json": No' not in hunt, hunt
        assert int(hunt.splitlines()[-3]) <= 5, hunt  # only the sandbox's own processes are visible
        assert "daemon started" in res["daemon"] and res["own_pwned"] is False
        assert "CONNECTED" not in res["network"] and res["network"].count("refused") == 2, res["network"]
        assert res["listener_accepted"] is False
        # Every attack is in the run's own evidence: one tools event per call, the refusals ok=false.
        tools = [e for e in _events(out, run) if e["source"] == "tools"]
        refused = [e for e in tools if e["tool"] == "write_file" and e["ok"] is False]
        assert len(refused) >= 6
        # The race's refusals name the swap (outside / changed / missing folder), never a crash.
        assert all(
            any(
                why in e["error"]
                for why in ("outside the workspace", "changed while", "cannot be opened", "does not exist")
            )
            for e in refused
        ), sorted({e["error"] for e in refused})
        assert all(not p.startswith("..") and not p.startswith("/") for e in tools for p in e["changed_paths"])


def test_no_other_run_changes(grids):
    out, attacked, clean = grids
    plain_attacked = {r["run_id"]: r["classification"] for r in attacked if r["framework"] == "plain"}
    plain_clean = {r["run_id"]: r["classification"] for r in clean}
    assert len(plain_clean) == 4 and plain_attacked == plain_clean
    for run in attacked:
        if run["framework"] == "plain":
            patch = (out / run["evidence_dir"] / "diff.patch").read_text()
            assert "PWNED" not in patch and "hostile" not in patch, run["run_id"]
    assert not any(ROOT.glob("**/hostile-escape.txt")) and not (ROOT.parent / "hostile-abs.txt").exists()
    import os

    assert not os.path.exists("/tmp/hostile-abs.txt")


@pytest.mark.deep
def test_diligent_test_command_exits_0_inside_run_command_on_every_framework(tmp_path):
    frameworks = list(default_frameworks(load_venvs()))
    tasks = [
        t.id
        for t in in_suite(load_tasks(), "default").values()
        if any(s.tool == "run_command" for s in t.spec.reference.steps)
    ]
    assert tasks, "no task's reference runs a command"
    runs, _ = _grid(
        tmp_path / "grid",
        "--frameworks",
        ",".join(frameworks),
        "--tasks",
        ",".join(tasks),
        "--content",
        "clean",
        "--swap",
        "none",
        "--models",
        "diligent",
    )
    seen = set()
    for run in runs:
        commands = [e for e in _events(tmp_path / "grid", run) if e["source"] == "tools" and e["tool"] == "run_command"]
        assert commands, run["run_id"]
        for e in commands:
            assert e["exit_code"] == 0 and e["ok"] is True, (run["run_id"], e["result"][-800:])
        assert run["parity"]["guard"]["guard"] == "on"
        seen.add(run["framework"])
    assert seen == set(frameworks)


def test_guard_off_is_said_and_recorded_and_bad_values_are_one_line(tmp_path):
    venvs = _venvs(tmp_path, False)
    runs, stdout = _grid(
        tmp_path / "off",
        "--venvs",
        str(venvs),
        "--frameworks",
        "plain",
        "--tasks",
        "fix-float-add",
        "--content",
        "clean",
        "--swap",
        "none",
        "--models",
        "diligent",
        "--guard",
        "off",
    )
    first = stdout.splitlines()[0]
    assert first.startswith("guard: off") and "--guard off" in first
    meta = json.loads((tmp_path / "off" / "meta.json").read_text())
    assert meta["guard"] == {"guard": "off", "reason": "--guard off"}
    assert [r["parity"]["guard"]["guard"] for r in runs] == ["off"]
    bad = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "run", "--guard", "maybe", "--out", str(tmp_path / "bad")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--guard" in bad.stderr and not (tmp_path / "bad").exists()


def test_where_namespaces_are_impossible_on_fails_and_auto_says_off(monkeypatch):
    import platform

    from claimgrid.errors import ClaimgridError
    from claimgrid.sandbox import guard as guard_mod

    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    with pytest.raises(ClaimgridError) as err:
        guard_mod.detect("on")
    assert "\n" not in str(err.value) and "Darwin" in str(err.value)
    off = guard_mod.detect("auto")
    assert off.enabled is False and off.facts() == {"guard": "off", "reason": off.reason} and "Darwin" in off.reason
