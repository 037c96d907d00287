"""A grid's environment holds only what the grid needs; the development tools are the ``dev``
group, which the README's test command and ``.ci/run`` name (issue 44, item 1)."""

import re
import tomllib

from claimgrid import ROOT


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement, maxsplit=1)[0].lower()


def _readme_commands() -> list[str]:
    """The commands of README's "Two commands" block, comments dropped."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Two commands", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_uv_installs_no_group_by_default_and_the_dev_tools_are_only_in_dev():
    project = _pyproject()
    assert project["tool"]["uv"]["default-groups"] == []
    dev = {_name(r) for r in project["dependency-groups"]["dev"]}
    assert {"pytest", "mypy", "ruff", "import-linter", "hypothesis"} <= dev
    runtime = {_name(r) for r in project["project"]["dependencies"]}
    assert not dev & runtime, f"development tools among the grid's dependencies: {sorted(dev & runtime)}"
    # the lock records the same: `uv sync --locked` would fail otherwise, but a stale lock is a merge's risk
    lock = (ROOT / "uv.lock").read_text()
    claimgrid = lock.split('name = "claimgrid"', 1)[1].split("[[package]]", 1)[0]
    assert "default-groups = []" in claimgrid


def test_the_readme_test_command_names_the_dev_group_and_ci_runs_it():
    commands = _readme_commands()
    assert "uv run grid.py" in commands
    tests = [c for c in commands if c.endswith("pytest")]
    assert len(tests) == 1, commands
    assert "--group dev" in tests[0]
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines() if not line.strip().startswith(("#", "echo"))]
    assert tests[0] in ci_lines, f".ci/run does not run the README's test command {tests[0]!r}"
    # every development tool .ci/run calls is called through the group that installs it
    dev = {_name(r) for r in _pyproject()["dependency-groups"]["dev"]} | {"lint-imports"}
    for line in ci_lines:
        words = line.replace("step ", "", 1).split()
        if words[:2] == ["uv", "run"]:
            tool = next(w for w in words[2:] if not w.startswith("-") and w != "dev")
            if tool in dev:
                assert "--group dev" in line, line
