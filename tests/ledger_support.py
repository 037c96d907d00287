"""One real grid for the ledger tests, run once per test session through ``grid.py run``
(the ``ledger_grid`` fixture of tests/conftest.py).

The grid runs the dependency-free ``plain`` test framework under two names (two venvs.toml
entries, one project: two real adapter processes per cell) against the real gateway,
verifier and classifier. Tasks, conditions and models are read from tasks/, conditions/
and the reference-model registry: one task per role among builder and reviewer, the
clean condition and one condition carrying an attacker goal, one swap condition of each
kind (none, substitute, refuse), every default reference model and the default
substitute (so a substitute-equals-assigned no-op and a never-reached swap both occur).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference.registry import default_models, default_substitute
from claimgrid.store.lines import read_events, read_runs

DEFAULT_MODELS, DEFAULT_SUBSTITUTE = list(default_models()), default_substitute()

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("plain", "plain-b")


def selection() -> dict:
    tasks = in_suite(load_tasks(), "default")  # the default grid's tasks (other suites run apart)
    picked_tasks = [next(t.id for t in tasks.values() if t.role == role) for role in ("builder", "reviewer")]
    content = load_content_conditions()
    clean = next(c.name for c in content.values() if c.carries is None)
    attack = next(c.name for c in content.values() if c.carries == "attacker_goal")
    swaps = load_swap_conditions()
    picked_swaps = [
        next(s.name for s in swaps.values() if s.on_unavailable == kind) for kind in ("none", "substitute", "refuse")
    ]
    return {
        "tasks": picked_tasks,
        "content": [clean, attack],
        "swap": picked_swaps,
        "models": list(DEFAULT_MODELS),
        "substitute": DEFAULT_SUBSTITUTE,
    }


def build_ledger(base: Path) -> Path:
    """Run the ledger tests' grid under ``base``; its ledger folder. Called once per session
    by the ``ledger_grid`` fixture (tests/conftest.py), which the tests read."""
    venvs = base / "venvs.toml"
    venvs.write_text(
        "".join(
            f'[frameworks.{name}]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
            f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n\n'
            for name in FRAMEWORKS
        )
    )
    sel = selection()
    out = base / "grid"
    # --jobs 4 on two cores: the `slow` fault runs sleep past their 15 s deadline; more slots
    # than cores let the other runs go on meanwhile (jobs is not a parity fact).
    cmd = [
        sys.executable,
        str(ROOT / "grid.py"),
        "run",
        "--venvs",
        str(venvs),
        "--out",
        str(out),
        "--tasks",
        ",".join(sel["tasks"]),
        "--content",
        ",".join(sel["content"]),
        "--swap",
        ",".join(sel["swap"]),
        "--models",
        ",".join(sel["models"]),
        "--substitute",
        sel["substitute"],
        "--jobs",
        "4",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def copy_ledger(src: Path, dst: Path) -> Path:
    """A writable copy of the session's ledger ``src`` (evidence files stay read-only, as the store writes them)."""
    shutil.copytree(src, dst)
    return dst


def records(folder: Path) -> list[dict]:
    return read_runs(folder / "runs.jsonl").values


def events(folder: Path, rec: dict) -> list[dict]:
    return read_events(folder / rec["evidence_dir"] / "events.jsonl")


def classification(**given) -> dict:
    """A complete classification of the current record schema (claimgrid.store.record): a
    clean, unswapped run that went normally, with ``given`` fields over it (a test states
    only the fields it is about)."""
    return {
        "claim_verdict": "consistent",
        "injection": "not applicable",
        "legitimate": "not applicable",
        "swap": "none",
        "process": "ok",
        **given,
    }


def ledger_text(folder: Path) -> str:
    """LEDGER.md as a reader who follows its links reads it: each section LEDGER.md moved to
    DETAILS.md (claimgrid.ledger.sections.fold: heading, first paragraph, a link) replaced by the
    whole section from there, at its place."""
    import re

    md = (folder / "LEDGER.md").read_text()
    details = folder / "DETAILS.md"
    if not details.exists():
        return md
    text = details.read_text()
    whole = {}
    # sections are separated by their anchors: cut each at the next top-level section's anchor
    anchors = [m for m in re.finditer(r'<a id="([^"]+)"></a>\n## ', text)]
    for a, b in zip(anchors, anchors[1:] + [None]):
        whole[a.group(1)] = text[a.start() : b.start() if b else None].rstrip("\n")
    pattern = re.compile(
        r'(<a id="([^"]+)"></a>\n## [^\n]*\n(?:(?!<a id=)[^\n]*\n)*?)The whole section \(\d+ lines, every table\) is in \[DETAILS\.md\]\(DETAILS\.md#[\w-]+\)\.'
    )
    out = pattern.sub(lambda m: whole.get(m.group(2), m.group(0)), md)
    return re.sub(r"\]\((?:LEDGER|DETAILS)\.md#", "](#", out)


def headline_row(head: str, model: str, framework: str) -> list[str] | None:
    """The headline table's cells for ``model`` on ``framework``: the row whose model cell names
    it (rows that differ only in their model are one row naming each) and whose frameworks cell
    is that framework, a group holding it ("a, b (identical in all N cells)") or all frameworks."""
    for line in head.splitlines():
        if not line.startswith("| ") or line.startswith("| model |") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if model not in [m.strip() for m in cells[0].split(",")]:
            continue
        fws = cells[1].split(" (identical in all")[0]
        if fws.startswith("all ") or framework in [f.strip() for f in fws.split(",")]:
            return cells
    return None
