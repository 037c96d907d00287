"""Adding a framework: one folder + one venvs.toml entry, nothing else touched.

A copy of ``frameworks/plain`` under a new name plus one ``venvs.toml`` entry, in a
temporary copy of the project, makes ``uv run --group dev pytest`` run the conformance suite for it
and pass (only that framework's conformance tests are run inside the copy: they are
what the entry adds; the rest of the suite is this project's own run). What
``grid.py new-framework`` writes is tests/integration/commands/test_new_framework.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimgrid.inputs.venvs import BYTECODE_CACHE

from tests.conftest import ROOT
from tests.integration.commands.test_new_framework import SKIP, _tree

ENTRY = (
    '\n[frameworks.{name}]\npython = "3.11"\nproject = "frameworks/{name}"\nadapter = "frameworks/{name}/adapter.py"\n'
)


def _copy_project(dest: Path) -> Path:
    shutil.copytree(ROOT, dest, ignore=lambda d, names: [n for n in names if n in SKIP])
    (dest / "ledger").mkdir()
    return dest


@pytest.mark.frameworks
def test_a_copy_of_plain_with_one_entry_passes_the_conformance_suite(tmp_path):
    project = _copy_project(tmp_path / "project")
    name = "copied-plain"
    before = _tree(project)
    shutil.copytree(project / "frameworks" / "plain", project / "frameworks" / name)
    (project / "venvs.toml").write_text((project / "venvs.toml").read_text() + ENTRY.format(name=name))
    after = _tree(project)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {"venvs.toml"} | {k for k in after if k.startswith(f"frameworks/{name}/")}

    # The project's own environment serves the copy (same lock): no second driver venv.
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYTEST")}
    env.update(UV_PROJECT_ENVIRONMENT=sys.prefix, UV_PYTHON_DOWNLOADS="never")
    proc = subprocess.run(
        [
            "uv",
            "run",
            "--frozen",
            "--group",
            "dev",
            "pytest",
            "tests/frameworks/test_conformance.py",
            "-k",
            name,
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    conformance_tests = [
        n for n in dir(__import__("tests.frameworks.test_conformance", fromlist=["x"])) if n.startswith("test_")
    ]
    assert f"{len(conformance_tests)} passed" in out, out[-2000:]
    assert (project / ".venvs" / name / "bin" / "python").exists()
    # Only the new framework's venv was built in the copy (beside the tasks' own environments,
    # which the test session builds for any framework test: .venvs/tasks/). A venv is a folder;
    # the build lock beside it (claimgrid.inputs.venvs: .NAME.lock) is a file; the shared bytecode
    # cache (BYTECODE_CACHE) is no venv.
    assert sorted(
        p.name for p in (project / ".venvs").iterdir() if p.is_dir() and p.name not in ("tasks", BYTECODE_CACHE)
    ) == [name]
