"""Hostile content through the real pipeline: one small grid on ``plain`` (real gateway,
adapter, tool layer, sandbox, verifier, store, ledger) where test-double reference models
(tests/fixtures/hostile_bytes_policies.py, loaded with ``--policies`` like any policy file) emit a
lone surrogate, make a 1,200-level tree and a path past PATH_MAX, and flood a command's
output, beside an ordinary ``diligent`` run. The grid finishes with a ledger, each hostile
run is a recorded result, nothing is left in the temporary folder, ``--resume`` of the
finished folder works, and the ordinary run's classification is the one the session's
default-matrix grid gave the same cell (tests/conftest.py ``default_grid``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT, select_runs

POLICIES = ROOT / "tests" / "fixtures" / "hostile_bytes_policies.py"
CELL = ["--tasks", "fix-float-add", "--content", "clean", "--swap", "none"]
HOSTILE = ["surrogate-speaker", "deep-digger", "flooder"]


def _harness_folders() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(("claimgrid-", "cg-"))}


@pytest.fixture(scope="module")
def hostile_grid(tmp_path_factory, plain_venvs, default_grid):
    """The grid (``default_grid``, its control, is asked for here so that every test of this
    file runs in that grid's xdist group: this grid is then built once per session)."""
    from claimgrid.commands.cli import main

    out = tmp_path_factory.mktemp("hostile-grid") / "ledger"
    before = _harness_folders()
    code = main(
        [
            "run",
            "--venvs",
            str(plain_venvs),
            "--policies",
            str(POLICIES),
            *CELL,
            "--models",
            ",".join(["diligent", *HOSTILE]),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--no-progress",
        ]
    )
    left = _harness_folders() - before
    return out, code, left


@pytest.fixture(scope="module")
def hp(hostile_grid):
    """The policy file as the grid loaded it (importing it again would register its models twice)."""
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(POLICIES))


def _by_model(folder):
    return {r["model"]: r for r in read_runs(folder / "runs.jsonl").values}


def test_the_grid_finishes_with_a_ledger_and_leaves_nothing_behind(hostile_grid):
    out, code, left = hostile_grid
    assert code == 0
    for name in ("LEDGER.md", "ledger.html", "RUNS.md", "runs.jsonl", "meta.json"):
        assert (out / name).is_file(), name
    runs = _by_model(out)
    assert sorted(runs) == sorted(["diligent", *HOSTILE])
    for rec in runs.values():
        assert (out / rec["evidence_dir"] / "RUN.md").is_file()
        assert not rec["classification"]["process"] == "adapter_error", rec["run_id"]
    assert not left, f"temporary folders left behind: {sorted(left)}"
    assert not list((out / "runs").glob(".*.tmp")), "a temporary evidence folder was left"


def test_the_ordinary_run_is_classified_as_without_the_hostile_ones(hostile_grid, default_grid):
    out, _, _ = hostile_grid
    mine = _by_model(out)["diligent"]
    [control] = select_runs(default_grid, [*CELL, "--models", "diligent"])
    assert mine["classification"] == control["classification"]
    assert mine["truth"] and all(mine["classification"][k] == v for k, v in mine["truth"].items())


def test_a_lone_surrogate_is_stored_losslessly_and_rendered(hostile_grid, hp):
    out, _, _ = hostile_grid
    rec = _by_model(out)["surrogate-speaker"]
    folder = out / rec["evidence_dir"]
    events = read_events(folder / "events.jsonl")
    [report] = [e for e in events if e["source"] == "agent"]
    assert hp.SURROGATE in report["text"]  # the model's exact text, back from the store
    assert hp.SURROGATE in json.loads((folder / "transcript.json").read_text())["final_text"]
    tools = [e for e in events if e["source"] == "tools"]
    # The refused calls are events (nothing dropped); the command that made a non-UTF-8 name ran.
    assert [e["tool"] for e in tools][:4] == ["read_file", "search", "run_command", "list_dir"]
    assert tools[0]["ok"] is False and hp.SURROGATE in tools[0]["args"]["path"]
    bad = 'bad\udcff\tname "q".txt'  # the byte 0xff, as os.fsdecode spells it
    assert tools[2]["ok"] is True and tools[2]["changed_paths"] == [bad]
    diff = next(e for e in events if e["source"] == "verifier" and e["kind"] == "diff")
    scope = next(e for e in events if e["source"] == "verifier" and e["kind"] == "scope")
    assert bad in [f["path"] for f in diff["files"]]  # the real path, not git's quoted spelling
    assert scope["outside_allowed"] == [bad]
    assert rec["classification"]["outcome"] == "SCOPE_VIOLATION"
    # The pages show the surrogate as visible text; they were written at all.
    assert "\\ud800" in (folder / "RUN.md").read_text(encoding="utf-8") or "\\ud800" in (out / "ledger.html").read_text(
        encoding="utf-8"
    )


def test_a_deep_tree_is_a_recorded_result(hostile_grid):
    out, _, _ = hostile_grid
    rec = _by_model(out)["deep-digger"]
    events = read_events(out / rec["evidence_dir"] / "events.jsonl")
    dig = next(e for e in events if e["source"] == "tools" and e["tool"] == "run_command")
    assert dig["ok"] is True and dig["changed_workspace"] is True and dig.get("snapshot_cut")
    diff = next(e for e in events if e["source"] == "verifier" and e["kind"] == "diff")
    # Diffed as far as it can be read: the trees listed by their folders' paths, unread; the
    # tests run; the outcome is judged (the trees are outside the task's scope), never UNKNOWN.
    assert diff["limit"] is True and "listed by path, not read" in diff["error"]
    assert any(f["path"].startswith("deep/") for f in diff["files"]), diff["files"]
    assert rec["classification"]["outcome"] != "UNKNOWN"


def test_an_output_flood_is_cut_and_counted(hostile_grid, hp):
    out, _, _ = hostile_grid
    rec = _by_model(out)["flooder"]
    events = read_events(out / rec["evidence_dir"] / "events.jsonl")
    flood = next(e for e in events if e["source"] == "tools" and e["tool"] == "run_command")
    assert flood["output_bytes"] == hp.FLOOD_BYTES + len("end\n")
    assert flood["output_cut"] is True and flood["result_chars"] <= 17_000
    assert "end" in flood["result"]  # the tail is kept
    assert rec["classification"]["outcome"] == "PASS"


def test_resume_of_the_finished_grid_does_not_crash(hostile_grid, plain_venvs, tmp_path):
    # A copy, resumed by a process of its own as a user resumes (a grid run in this process
    # keeps its folder's writer lock until the process ends).
    out = tmp_path / "copy"
    shutil.copytree(hostile_grid[0], out)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--resume",
            str(out),
            "--venvs",
            str(plain_venvs),
            "--policies",
            str(POLICIES),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(read_runs(out / "runs.jsonl").values) == 1 + len(HOSTILE)
