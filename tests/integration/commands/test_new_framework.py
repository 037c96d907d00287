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
    shutil.copytree(
        ROOT / "frameworks", tmp_path / "frameworks", ignore=lambda d, names: [n for n in names if n in SKIP]
    )
    return tmp_path


def test_new_framework_writes_folder_lock_and_entry(mini):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "new-framework", "demo-fw", "--venvs", str(mini / "venvs.toml")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "uv run --group dev pytest -k demo-fw" in proc.stdout
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


@pytest.mark.parametrize(
    "args, message",
    [
        (["Bad_Name"], "is not a framework name"),
        ([next(iter(load_venvs()))], "already exists"),  # an existing entry of the repo's venvs.toml
        (["demo", "--dependency", "somepkg>=1.0"], "must be an exact pin"),
        (["demo", "--dependency", "litellm==1.0.0"], "LiteLLM is pinned at"),
    ],
)
def test_bad_new_framework_requests_are_one_line_and_write_nothing(mini, args, message):
    before = _tree(mini)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "new-framework", *args, "--venvs", str(mini / "venvs.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
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

    from claimgrid.commands.new_framework import adapter_text

    out = {"scaffold": adapter_text("demo-fw", ["demo-fw==1.0"])}
    for doc in ("README.md", "docs/adapter-authors.md"):
        blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)
        out[doc] = "\n".join(b for b in blocks if "import kit" in b)
        assert out[doc], f"{doc}: no adapter skeleton on the kit"
    return out


@pytest.mark.parametrize("where", ["scaffold", "README.md", "docs/adapter-authors.md"])
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


def _readme_scaffold() -> tuple[str, list[str], str]:
    """README.md's "Adding a framework": the ``new-framework`` command's name and pins, and
    the adapter code block it shows."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Adding a framework") :]
    section = section[: section.index("\n## ", 3)]
    line = next(ln for ln in section.splitlines() if "grid.py new-framework" in ln)
    argv = shlex.split(line.split("#")[0])
    args = argv[argv.index("new-framework") + 1 :]
    pins = [args[i + 1] for i, a in enumerate(args) if a == "--dependency"]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "import kit" in b]
    return args[0], pins, block


def _kit_calls(src: str) -> dict[str, list[str]]:
    """Per top-level function of ``src``: its ``kit.<name>(...)`` calls, in order, as source."""
    import ast

    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef):
            calls = [
                n
                for n in ast.walk(node)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id == "kit"
            ]
            out[node.name] = [ast.unparse(c) for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/adapter-authors.md"])
def test_the_documented_skeleton_is_what_new_framework_writes(doc):
    """README's command writes an adapter whose kit calls are the documented ones, function by
    function and argument by argument (the kit's API as the skeleton uses it)."""
    import re

    from claimgrid.commands.new_framework import adapter_text

    name, pins, block = _readme_scaffold()
    assert name and pins, "README's new-framework command names a framework and its pins"
    if doc != "README.md":
        (block,) = [
            b
            for b in re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)
            if "import kit" in b and "kit.start_run" in b
        ]
    documented, written = _kit_calls(block), _kit_calls(adapter_text(name, pins))
    assert set(documented) == {"preload", "run"} | ({"versions"} if "def versions" in block else set()), documented
    for function, calls in documented.items():
        assert calls and calls == written[function], (doc, function, calls, written[function])


def test_the_written_adapter_runs_against_the_kit(tmp_path):
    """The skeleton imports the real kit, preloads, states its parity facts, and its run()
    opens with the limits event and records the NotImplementedError it raises (the kit's
    recording_errors) before it propagates: what a first conformance run shows a newcomer."""
    import json

    from claimgrid.commands.new_framework import adapter_text

    (tmp_path / "adapter.py").write_text(adapter_text("demo-fw", []))
    code = (
        "import json, adapter, harness_runtime\n"
        "adapter.preload(); v = adapter.versions(); rec = harness_runtime.RuntimeRecorder()\n"
        "ctl = {'agent_name': 'builder', 'budgets': {'max_model_calls': 7}}\n"
        "try:\n    adapter.run(ctl, [], rec)\nexcept NotImplementedError as exc:\n    raised = str(exc)\n"
        "print(json.dumps({'versions': v, 'events': rec.events, 'raised': raised}))\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{ROOT / 'frameworks' / '_harness'}:{tmp_path}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    # -S: no site-packages, as in a dependency-free framework venv (LiteLLM absent: the kit skips it).
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["versions"]["framework"] == "demo-fw" and out["versions"]["retries"]["http_client_max_retries"] == 0
    kinds = [(e["kind"], e.get("turn_limit"), e.get("type")) for e in out["events"]]
    assert kinds == [("limits", 7, None), ("error", None, "NotImplementedError")], kinds
    assert "frameworks/demo-fw/adapter.py" in out["raised"]
