"""check-task: every shipped task's answer key holds; broken answer keys are one line naming the field.

Everything goes through ``grid.py`` as a task author runs it (real harness tools, real
verifier, real test commands in the task's own environment). Broken tasks are made in
a temporary copy of ``tasks/``; which shipped task is broken is chosen by what its data
holds, never by name.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claimgrid.errors import DataError
from claimgrid.inputs.tasks import ensure_task_envs, load_tasks

from tests.conftest import ROOT


def _toml_value(v) -> str:
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(type(v))


def _write_spec(path, spec: dict) -> None:
    """Write a task spec dict back as TOML (top-level scalars, then one inline value per table key)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if v is not None and not isinstance(v, dict)]
    for k, v in spec.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items() if vv is not None]
    path.write_text("\n".join(lines) + "\n")


def _check(tasks_dir, *ids):
    return subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "check-task", "--tasks-dir", str(tasks_dir), *ids],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def _shipped_ids() -> list[str]:
    return sorted(p.name for p in (ROOT / "tasks").iterdir() if (p / "task.toml").is_file())


@pytest.mark.timeout(660)  # check-task runs every shipped task's tests before and after (its own timeout: 600 s)
def test_every_shipped_task_passes_check_task():
    proc = _check(ROOT / "tasks")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tid in _shipped_ids():
        assert f"{tid}: ok" in proc.stdout.splitlines(), tid
    assert "Traceback" not in proc.stderr


@pytest.fixture
def broken(tmp_path):
    """Factory: copy one shipped task (chosen by ``predicate``), let ``mutate(spec, repo)`` break it."""

    def make(predicate, mutate):
        tasks = load_tasks()
        task = next((t for t in tasks.values() if predicate(t)), None)
        assert task is not None, "no shipped task fits this test"
        dest = tmp_path / "tasks" / task.id
        shutil.copytree(task.folder, dest)
        spec = task.spec.model_dump(mode="json", exclude_none=True)
        mutate(spec, dest / "repo")
        _write_spec(dest / "task.toml", spec)
        return tmp_path / "tasks", dest / "task.toml", task

    return make


def _edits(task):
    return [s for s in task.spec.reference.steps if s.tool == "edit_file"]


def _one_line_naming(proc, toml, field: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    named = [ln for ln in errors if f"field '{field}'" in ln]
    assert len(named) == 1 and str(toml) in named[0], proc.stderr
    return named[0]


def test_a_typo_in_a_reference_step_is_one_line_naming_the_step(broken):
    def typo(spec, repo):
        for step in spec["reference"]["steps"]:
            if step["tool"] == "edit_file":
                step["args"]["old"] = step["args"]["old"].replace(" ", "  ", 1)
                return

    tasks_dir, toml, task = broken(lambda t: any(" " in s.args["old"] for s in _edits(t)), typo)
    proc = _check(tasks_dir, task.id)
    index = next(i for i, s in enumerate(task.spec.reference.steps) if s.tool == "edit_file")
    line = _one_line_naming(proc, toml, f"reference.steps.{index}.args.old")
    assert "not found" in line
    # list runs the same static check, quickly
    listed = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "list", "--tasks-dir", str(tasks_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    _one_line_naming(listed, toml, f"reference.steps.{index}.args.old")


def test_a_fixture_that_already_passes_is_named(broken):
    def prefix(spec, repo):
        # Apply the reference edits to the fixture itself, and let the reference only read:
        # the fixture now passes its test command before any step.
        for step in spec["reference"]["steps"]:
            if step["tool"] == "edit_file":
                f = repo / step["args"]["path"]
                f.write_text(f.read_text().replace(step["args"]["old"], step["args"]["new"], 1))
        spec["reference"]["steps"] = [s for s in spec["reference"]["steps"] if s["tool"] != "edit_file"]

    tasks_dir, toml, task = broken(
        lambda t: (
            t.role == "builder"
            and t.spec.expectation.diff == "required"
            and t.spec.expectation.test_command
            and _edits(t)
        ),
        prefix,
    )
    proc = _check(tasks_dir, task.id)
    line = _one_line_naming(proc, toml, "expectation.test_command")
    assert "already passes" in line


def test_an_attacker_goal_without_steps_is_an_error(broken):
    def no_steps(spec, repo):
        spec["attacker_goal"]["steps"] = []

    tasks_dir, toml, task = broken(lambda t: t.spec.attacker_goal.check.kind != "review_verdict", no_steps)
    proc = _check(tasks_dir, task.id)
    _one_line_naming(proc, toml, "attacker_goal.steps")
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1, proc.stderr


def test_an_attacker_check_the_steps_do_not_achieve_is_named(broken):
    def unreachable(spec, repo):
        spec["attacker_goal"]["check"] = {"kind": "file_exists", "path": "never-written-by-anyone.txt"}

    tasks_dir, toml, task = broken(lambda t: t.spec.attacker_goal.check.kind != "review_verdict", unreachable)
    proc = _check(tasks_dir, task.id)
    assert "not achieved" in _one_line_naming(proc, toml, "attacker_goal.check")


def test_a_task_env_needs_both_files(tmp_path):
    task = next(t for t in load_tasks().values() if t.env is not None)
    dest = tmp_path / "tasks" / task.id
    shutil.copytree(task.folder, dest)
    (dest / "uv.lock").unlink()
    with pytest.raises(DataError) as exc:
        load_tasks(tmp_path / "tasks")
    assert str(dest / "pyproject.toml") in str(exc.value) and "uv.lock" in str(exc.value)


def test_task_envs_share_the_framework_build_path_and_noop_check():
    """Task.python is the task venv's interpreter; a second ensure is a stamp check, not a build."""
    with_env = [t for t in load_tasks().values() if t.env is not None]
    assert with_env, "at least one shipped task carries its own environment"
    ensure_task_envs(with_env)
    t0 = time.perf_counter()
    again = ensure_task_envs(with_env)
    assert not any(info.built for info in again.values())
    assert time.perf_counter() - t0 < 5
    for t in with_env:
        # The venv's interpreter, its folder's symlinks resolved (the sandbox binds real paths).
        assert Path(t.python) == t.env.venv_python.parent.resolve() / t.env.venv_python.name
        assert t.env.venv_python.exists()
        if "{python}" in (t.spec.expectation.test_command or []):
            assert t.python in t.test_command()
        out = subprocess.run([t.python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
        assert Path(out.stdout.strip()).resolve() == t.env.venv.resolve(), (t.id, out)
    stdlib = [t for t in load_tasks().values() if t.env is None]
    here = Path(sys.executable)
    assert all(Path(t.python) == here.parent.resolve() / here.name for t in stdlib)


def test_an_unknown_suite_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "grid"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "run", "--suite", "no-such-suite", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "suite 'no-such-suite'" in lines[0], proc.stderr
    assert not out.exists()
