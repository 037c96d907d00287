"""Shared pieces of the real-model grid tests (no tests here): running ``grid.py`` as a
user does, reading a ledger folder, and picking a small cell from the registries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.venvs import default_frameworks, load_venvs
from claimgrid.reference import registry
from claimgrid.store.lines import read_events, read_runs

from .conftest import ROOT


def grid(*args, env: dict | None = None, timeout: float = 1200) -> subprocess.CompletedProcess:
    """``uv run grid.py ARGS`` as a subprocess (the driver's own interpreter), output captured."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def lines(path: Path) -> list[dict]:
    """The JSON lines of a ``runs.jsonl`` (absent: none) or an ``events.jsonl``, by the store's reader."""
    if path.name == "events.jsonl":
        return read_events(path) if path.exists() else []
    return read_runs(path).values


def records(folder: Path) -> dict[str, dict]:
    return {r["run_id"]: r for r in lines(folder / "runs.jsonl")}


def meta(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text())


def exchanges(folder: Path, run_id: str) -> list[dict]:
    return [
        e
        for e in lines(folder / "runs" / run_id / "events.jsonl")
        if e["source"] == "gateway" and e["kind"] == "exchange"
    ]


def frameworks() -> list[str]:
    """Every framework of the default matrix (venvs.toml ``default``)."""
    return list(default_frameworks(load_venvs()))


def final_answer_protocols() -> list[tuple[str, str]]:
    """Every final-answer protocol in venvs.toml, ``(tool, argument)`` (the fake provider's data)."""
    return sorted({e.final_answer for e in load_venvs().values() if e.final_answer is not None})


def control_conditions() -> tuple[str, str]:
    """The baseline content (carries nothing) and swap (no outage) conditions, from the data."""
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    return content, swap


def substitute_swap() -> str:
    """A swap condition where a substitute serves and says so (the most exchanges to replay)."""
    return next(
        s.name
        for s in load_swap_conditions().values()
        if s.on_unavailable == "substitute" and s.reported_name != "assigned"
    )


def two_models() -> list[str]:
    return list(registry.default_models()[:2])


def plain_venvs(folder: Path) -> Path:
    """A venvs.toml holding only the dependency-free ``plain`` framework (cheap pipeline checks)."""
    path = folder / "venvs-plain.toml"
    path.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n'
    )
    return path
