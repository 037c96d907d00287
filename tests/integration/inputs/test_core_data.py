"""Tasks and conditions are strict data: one bad field rejects the file, in one clear line."""

import shutil
import subprocess
import sys

import pytest

from claimgrid.errors import DataError
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import load_tasks

from tests.conftest import ROOT


@pytest.fixture
def data_copy(tmp_path):
    shutil.copytree(ROOT / "tasks", tmp_path / "tasks")
    shutil.copytree(ROOT / "conditions", tmp_path / "conditions")
    return tmp_path


def _grid_list(root):
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "list",
            "--tasks-dir",
            str(root / "tasks"),
            "--conditions-dir",
            str(root / "conditions"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def _shipped(kind: str) -> set[str]:
    """Names as the data folders hold them: a task is a folder with task.toml, a condition a .toml file."""
    if kind == "tasks":
        return {p.name for p in (ROOT / "tasks").iterdir() if (p / "task.toml").is_file()}
    return {p.stem for p in (ROOT / "conditions" / kind).glob("*.toml")}


def test_the_shipped_data_loads():
    assert set(load_tasks()) == _shipped("tasks") and _shipped("tasks")
    assert set(load_content_conditions()) == _shipped("content")
    assert set(load_swap_conditions()) == _shipped("swap")


def test_grid_list_lists_every_task_and_condition(data_copy):
    proc = _grid_list(data_copy)
    assert proc.returncode == 0, proc.stderr
    for name in sorted(_shipped("tasks") | _shipped("content") | _shipped("swap")):
        assert f"  {name} " in proc.stdout, name


def _a_task_with(predicate) -> str:
    """The first shipped task (by id) whose spec satisfies ``predicate``: tests never name one."""
    tasks = load_tasks()
    found = [t.id for t in tasks.values() if predicate(t.spec)]
    assert found, "no shipped task fits this test"
    return found[0]


@pytest.mark.parametrize(
    "old, new, field",
    [
        ('role = "builder"', 'role = "architect"', "role"),
        ('diff = "required"', 'dif = "required"', "expectation.dif"),
        (
            'check = { kind = "file_exists", path = ".pwned" }',
            'check = { kind = "file_exists" }',
            "attacker_goal.check",
        ),
        ("test_timeout_s = 60", 'test_timeout_s = "soon"', "expectation.test_timeout_s"),
        ('[attacker_goal]\ninstruction = "', '[attacker_goal]\ninstruction = "--> ', "attacker_goal.instruction"),
        ("[expectation]", 'suite = "Not A Suite"\n[expectation]', "suite"),
    ],
)
def test_a_broken_task_is_one_line_naming_file_and_field(data_copy, old, new, field):
    # The task whose text holds every pattern above (the edits are textual).
    tid = _a_task_with(lambda s: s.attacker_goal.check.kind == "file_exists" and s.expectation.diff == "required")
    path = data_copy / "tasks" / tid / "task.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(DataError) as exc:
        load_tasks(data_copy / "tasks")
    assert str(path) in str(exc.value) and f"field '{field}" in str(exc.value)
    proc = _grid_list(data_copy)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and field in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "name, old, new, field",
    [
        ("swap/silent.toml", "unavailable_from_call = 2", 'unavailable_from_call = "two"', "unavailable_from_call"),
        ("swap/bound.toml", 'on_unavailable = "refuse"', 'on_unavailable = "explode"', "on_unavailable"),
        ("content/malicious.toml", 'carries = "attacker_goal"', 'carries = "attacker_goal"\ncolour = "red"', "colour"),
    ],
)
def test_a_broken_condition_is_one_line_naming_file_and_field(data_copy, name, old, new, field):
    path = data_copy / "conditions" / name
    path.write_text(path.read_text().replace(old, new, 1))
    proc = _grid_list(data_copy)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and f"field '{field}'" in lines[0], proc.stderr


def test_invalid_toml_names_the_file(data_copy):
    path = data_copy / "conditions" / "content" / "clean.toml"
    path.write_text("name = \n")
    proc = _grid_list(data_copy)
    assert proc.returncode == 2 and str(path) in proc.stderr and "not valid TOML" in proc.stderr


def test_template_without_task_text_is_rejected(data_copy):
    path = data_copy / "conditions" / "content" / "legitimate.toml"
    path.write_text(path.read_text().replace("{task_text}", "{task}"))
    with pytest.raises(DataError) as exc:
        load_content_conditions(data_copy / "conditions")
    assert str(path) in str(exc.value) and "task_text" in str(exc.value)


def test_every_fixture_file_is_in_this_projects_git():
    """A fixture's own .gitignore must not keep its files out of this repository (nor a nested .git)."""
    ignored = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", "tasks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert ignored == []
    assert not list((ROOT / "tasks").glob("*/repo/**/.git"))
