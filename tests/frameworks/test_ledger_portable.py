"""A published ledger is a function of its folder: on a checkout without tasks/ and
conditions/, re-rendering a real grid's ledger gives every file byte for byte again.

The grid runs through ``grid.py run`` with the first framework of venvs.toml: one task per
role among builder and reviewer, one content condition per kind of slot (clean, attacker
goal, owner's note), the swap conditions that never swap and that refuse, two default
reference models and the default substitute, all read from the data folders and the
reference-model registry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference.registry import default_models, default_substitute

from tests.conftest import ROOT


def _selection() -> list[str]:
    framework = next(iter(tomllib.loads((ROOT / "venvs.toml").read_text())["frameworks"]))
    tasks = in_suite(load_tasks(), "default")
    picked = [next(t.id for t in tasks.values() if t.role == role) for role in ("builder", "reviewer")]
    content = load_content_conditions().values()
    kinds = [next(c.name for c in content if c.carries == kind) for kind in (None, "attacker_goal", "legitimate_note")]
    swaps = load_swap_conditions().values()
    swap = [next(s.name for s in swaps if s.on_unavailable == kind) for kind in ("none", "refuse")]
    models = list(dict.fromkeys([*list(default_models())[:2], default_substitute()]))
    return [
        "--frameworks",
        framework,
        "--tasks",
        ",".join(picked),
        "--content",
        ",".join(kinds),
        "--swap",
        ",".join(swap),
        "--models",
        ",".join(models),
        "--substitute",
        default_substitute(),
    ]


def _render(checkout: Path, ledger: Path, home: Path) -> subprocess.CompletedProcess:
    """Render ``ledger`` with the claimgrid package of ``checkout`` (its own ROOT)."""
    script = (
        "import claimgrid, sys\n"
        "from claimgrid.ledger import render_ledger\n"
        "print(claimgrid.ROOT)\n"
        "render_ledger(sys.argv[1])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(ledger)],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(checkout), "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(checkout)  # that package was imported, not another
    return proc


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.deep
def test_a_ledger_renders_the_same_without_the_checkouts_tasks_and_conditions(tmp_path):
    out = tmp_path / "grid"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--out",
            str(out),
            "--jobs",
            "2",
            "--no-progress",
            *_selection(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    before = _tree(out)
    assert "LEDGER.md" in before and any(name.endswith("/RUN.md") for name in before)

    # Another checkout: the same code, no tasks/ and no conditions/ (claimgrid.ROOT is the
    # folder above the imported package, so the copy's own ROOT has neither).
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "claimgrid", checkout / "claimgrid", ignore=shutil.ignore_patterns("__pycache__"))
    ledger = checkout / "published"
    shutil.copytree(out, ledger)
    assert not (checkout / "tasks").exists() and not (checkout / "conditions").exists()
    _render(checkout, ledger, tmp_path)
    after = _tree(ledger)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert changed == [], changed

    # A ledger written before grids stored these facts still renders, and says once what it
    # read from the checkout (this one) or left out (the copy without tasks/ and conditions/).
    meta = json.loads((ledger / "meta.json").read_text())
    for key in ("task_facts", "content_facts"):
        del meta[key]
    (ledger / "meta.json").write_text(json.dumps(meta))
    _render(checkout, ledger, tmp_path)
    md = (ledger / "LEDGER.md").read_text()
    assert md.count("Not recorded in this ledger") == 1 and "attacker-goal and owner's-note checks" in md
    assert "Read from this checkout's" not in md
    older = tmp_path / "older"
    shutil.copytree(ledger, older)
    _render(ROOT, older, tmp_path)
    md = (older / "LEDGER.md").read_text()
    assert md.count("Read from this checkout's tasks/ and conditions/") == 1, md
    assert "Not recorded in this ledger" not in md
