"""A grid starts each framework's runs as soon as its venv is built, while the others build;
a venv that fails to build is one line naming the framework, recorded in meta.json and the
ledger, its runs not started, and the other frameworks' runs are all recorded (issue 44).

A temporary copy of the project whose ``venvs.toml`` holds three copies of the stdlib
``plain`` framework (each a real locked project, built by the real builder with ``uv sync``):
one builds at once, one is held "slow" (the test holds its per-venv build lock, the same
lock two grids building one venv take, so its real build waits), and one fails (its
``uv.lock`` is not a lock file). Names of tasks, conditions and models are read from the data.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference.registry import default_models
from claimgrid.store.lines import read_runs

from tests.conftest import ROOT

COPIED = ["claimgrid", "grid.py", "tasks", "conditions", "frameworks/_harness", "pyproject.toml"]
TASK = next(iter(in_suite(load_tasks(), "default")))  # a stdlib task: no task environment to build
CONTENT = next(iter(load_content_conditions()))
SWAP = next(iter(load_swap_conditions()))
MODELS = default_models()[:2]
FIRST, HELD, BROKEN = "quick", "held", "broken"


def _project(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in COPIED:
        src = ROOT / rel
        (shutil.copytree(src, dest / rel, ignore=ignore) if src.is_dir() else shutil.copy2(src, dest / rel))
    toml = []
    for name in (FIRST, HELD, BROKEN):
        shutil.copytree(ROOT / "frameworks" / "plain", dest / "frameworks" / name, ignore=ignore)
        toml.append(
            f'[frameworks.{name}]\npython = "3.11"\nproject = "frameworks/{name}"\n'
            f'adapter = "frameworks/{name}/adapter.py"\n'
        )
    (dest / "frameworks" / BROKEN / "uv.lock").write_text("this is not a lock file\n")
    (dest / "venvs.toml").write_text("\n".join(toml))
    return dest


def _runs(folder: Path) -> list[dict]:
    """The runs recorded so far, read while the grid appends (the store's reader: a line being
    written is a torn last line, not yet a run)."""
    try:
        return read_runs(folder / "runs.jsonl").values
    except OSError:
        return []


def _run_grid(project: Path, *args: str, hold: Path | None = None, release_when=None):
    """``python grid.py run ARGS`` in ``project``; with ``hold``, the build lock of that venv is
    held until ``release_when()`` is true (or 120 s passed). Returns (proc, output, held_s)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    lock = None
    if hold is not None:
        hold.parent.mkdir(parents=True, exist_ok=True)
        lock = open(hold, "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [sys.executable, "grid.py", "run", *args],
        cwd=project,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    held_s = None
    try:
        if lock is not None:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 120 and proc.poll() is None and not release_when():
                time.sleep(0.2)
            held_s = time.monotonic() - t0
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
            lock = None
        out, err = proc.communicate(timeout=150)
    finally:
        if lock is not None:
            lock.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, out, err, held_s


def test_runs_start_while_a_venv_builds_and_a_failed_build_leaves_the_other_frameworks_runs(tmp_path):
    project = _project(tmp_path / "project")
    out_dir = tmp_path / "ledger"
    selection = ["--tasks", TASK, "--content", CONTENT, "--swap", SWAP, "--models", ",".join(MODELS)]
    per_framework = len(MODELS)

    def first_framework_done() -> bool:
        return sum(r["framework"] == FIRST for r in _runs(out_dir)) == per_framework

    proc, out, err, held_s = _run_grid(
        project,
        "--out",
        str(out_dir),
        "--no-progress",
        "--jobs",
        "2",
        *selection,
        hold=project / ".venvs" / f".{HELD}.lock",
        release_when=first_framework_done,
    )
    assert held_s is not None and held_s < 120, (
        f"the quick framework's runs did not finish while {HELD} built:\n{out}\n{err}"
    )

    # Exit 1 with the line that names the failed framework; no traceback.
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err + out
    error_lines = [ln for ln in (out + err).splitlines() if f"venvs: framework '{BROKEN}' failed to install" in ln]
    assert error_lines and all("runs not started" in ln for ln in error_lines), out + err
    assert f"the venv of {BROKEN} failed to build" in err

    # Progress named what was building and when each framework's runs started.
    assert f"venv {HELD}: building" in out or f"building {HELD}" in out, out
    assert f"venv {HELD}: ready" in out and f"its {per_framework} runs start" in out, out

    runs = _runs(out_dir)
    by_fw: dict[str, list[dict]] = {}
    for r in runs:
        by_fw.setdefault(r["framework"], []).append(r)
    assert sorted(by_fw) == sorted([FIRST, HELD])  # nothing of the failed framework ran
    assert all(len(v) == per_framework for v in by_fw.values()), {k: len(v) for k, v in by_fw.items()}

    meta = json.loads((out_dir / "meta.json").read_text())
    builds = meta["venv_builds"]
    assert {n: b["state"] for n, b in builds.items()} == {FIRST: "ready", HELD: "ready", BROKEN: "failed"}
    assert builds[HELD]["built"] is True
    # The quick framework's runs all ran before the held venv was ready; the held ones after.
    held_ready = builds[HELD]["ended_unix"]
    assert max(r["timings"]["started_unix"] for r in by_fw[FIRST]) < held_ready
    assert min(r["timings"]["started_unix"] for r in by_fw[HELD]) >= held_ready - 0.05
    [failure] = meta["venv_failures"]
    assert failure["framework"] == BROKEN and failure["runs_not_started"] == per_framework
    assert "\n" not in failure["error"] and failure["error"].startswith(
        f"venvs: framework '{BROKEN}' failed to install"
    )
    assert builds[BROKEN]["error"] == failure["error"]
    assert meta["finished"] is None and meta["grid_size"] == 3 * per_framework
    ledger = (out_dir / "LEDGER.md").read_text()
    assert "Framework venvs that failed to build" in ledger and f"`{BROKEN}`" in ledger

    # The build fixed, --resume runs the failed framework's cells and nothing else again.
    shutil.copy2(ROOT / "frameworks" / "plain" / "uv.lock", project / "frameworks" / BROKEN / "uv.lock")
    proc, out, err, _ = _run_grid(project, "--resume", str(out_dir), "--no-progress")
    assert proc.returncode == 0, out + err
    runs_after = _runs(out_dir)
    assert len(runs_after) == 3 * per_framework
    assert {r["run_id"]: r for r in runs_after if r["framework"] != BROKEN}.keys() == {r["run_id"] for r in runs}
    meta = json.loads((out_dir / "meta.json").read_text())
    assert meta["venv_failures"] == [] and meta["finished"] is not None
    assert "Framework venvs that failed to build" not in (out_dir / "LEDGER.md").read_text()
