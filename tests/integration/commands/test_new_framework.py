"""``grid.py new-framework NAME`` writes the folder (exact pins, the project's exclude-newer
window, adapter skeleton on the kit, README), locks it and adds the entry; bad requests are
one line and write nothing. That a copied framework folder plus one ``venvs.toml`` entry
passes the conformance suite is tests/frameworks/test_framework_new.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from claimgrid.commands.new_framework import ScaffoldError, new_framework
from claimgrid.inputs.venvs import load_venvs

from tests.conftest import ROOT

SKIP = {".git", ".venv", ".venvs", "ledger", "__pycache__", ".pytest_cache", ".claimgrid-stamp"}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def mini(tmp_path) -> Path:
    """A project root with the driver's pyproject (the lock window) and venvs.toml."""
    for f in ("pyproject.toml", "venvs.toml"):
        shutil.copy(ROOT / f, tmp_path / f)
    shutil.copytree(ROOT / "frameworks", tmp_path / "frameworks",
                    ignore=lambda d, names: [n for n in names if n in SKIP])
    return tmp_path


def test_new_framework_writes_folder_lock_and_entry(mini):
    proc = subprocess.run([sys.executable, str(ROOT / "grid.py"), "new-framework", "demo-fw",
                           "--venvs", str(mini / "venvs.toml")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "uv run pytest -k demo-fw" in proc.stdout
    folder = mini / "frameworks" / "demo-fw"
    assert {p.name for p in folder.iterdir()} == {"pyproject.toml", "uv.lock", "adapter.py", "README.md"}
    py = tomllib.loads((folder / "pyproject.toml").read_text())
    root_py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert py["tool"]["uv"]["exclude-newer"] == root_py["tool"]["uv"]["exclude-newer"]
    assert py["project"]["dependencies"] == []
    entries = load_venvs(mini / "venvs.toml")
    assert entries["demo-fw"].adapter == folder / "adapter.py"
    assert set(load_venvs()) < set(entries)  # every existing entry kept
    src = (folder / "adapter.py").read_text()
    compile(src, "adapter.py", "exec")
    assert "import kit" in src and "def run(ctl: dict, tools: list, rec)" in src


@pytest.mark.parametrize("args, message", [
    (["Bad_Name"], "is not a framework name"),
    ([next(iter(load_venvs()))], "already exists"),  # an existing entry of the repo's venvs.toml
    (["demo", "--dependency", "somepkg>=1.0"], "must be an exact pin"),
    (["demo", "--dependency", "litellm==1.0.0"], "LiteLLM is pinned at"),
])
def test_bad_new_framework_requests_are_one_line_and_write_nothing(mini, args, message):
    before = _tree(mini)
    proc = subprocess.run([sys.executable, str(ROOT / "grid.py"), "new-framework", *args,
                           "--venvs", str(mini / "venvs.toml")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert _tree(mini) == before


def test_a_failed_lock_leaves_nothing(mini, monkeypatch, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "uv").write_text("#!/bin/sh\necho 'error: no solution for the pins' >&2\nexit 1\n")
    (fake / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    before = _tree(mini)
    with pytest.raises(ScaffoldError, match="uv lock failed: error: no solution for the pins"):
        new_framework("demo", mini / "venvs.toml", ["somepkg==1.0"])
    assert _tree(mini) == before


def _kit_names() -> set[str]:
    """The kit's public top-level names, read from its source (importing it would set the
    adapters' offline environment in this process)."""
    import ast

    tree = ast.parse((ROOT / "frameworks" / "_harness" / "kit.py").read_text())
    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.With, ast.If, ast.For, ast.Try)):  # module level, nested
            todo.extend(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return {n for n in names if not n.startswith("_")}


def _adapter_skeletons() -> dict[str, str]:
    import re

    from claimgrid.commands.new_framework import ADAPTER

    out = {"scaffold": ADAPTER.format(name="demo-fw")}
    for doc in ("README.md", "docs/CONTRACTS.md"):
        blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)
        out[doc] = "\n".join(b for b in blocks if "import kit" in b)
        assert out[doc], f"{doc}: no adapter skeleton on the kit"
    return out


@pytest.mark.parametrize("where", ["scaffold", "README.md", "docs/CONTRACTS.md"])
def test_the_adapter_skeletons_follow_the_kit(where):
    """The new-framework template and the documented skeletons use the kit's API as it is:
    every kit name they mention exists, and each opens run() with kit.start_run and closes it
    with kit.final_message, as the adapters do."""
    import re

    src = _adapter_skeletons()[where]
    used = set(re.findall(r"(?<![\w/])kit\.(?!py\b)([A-Za-z_]\w*)", src))
    assert used and used <= _kit_names(), sorted(used - _kit_names())
    assert {"preload", "start_run", "final_message", "turn_limit"} <= used, sorted(used)
    adapters = [p.read_text() for p in (ROOT / "frameworks").glob("*/adapter.py")]
    assert all("kit.start_run(" in a for a in adapters)
