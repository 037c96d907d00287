#!/usr/bin/env python3
"""Warm vs fresh isolation, measured in one go on the same matrix.

    uv run bench/isolation.py [--frameworks strands,langgraph,crewai] [--jobs 2]

Runs the same grid (default: every framework x fix-float-add x 4 content x 4 swap x
diligent = 48 runs) once with ``--isolation fresh`` and once with ``--isolation warm``,
through ``grid.py`` exactly as a user runs it, and prints per-run figures for each mode
and their ratio. Both runs happen back to back on this machine, so the ratio is
meaningful even on a noisy shared machine; the absolute seconds are not portable.
It also checks that both modes gave the same classifications.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder
from claimgrid.store.record import dump  # noqa: E402


def run_grid(mode: str, out: Path, args) -> tuple[float, list[dict]]:
    cmd = [
        sys.executable,
        str(ROOT / "grid.py"),
        "run",
        "--isolation",
        mode,
        "--out",
        str(out),
        "--frameworks",
        args.frameworks,
        "--tasks",
        args.tasks,
        "--models",
        args.models,
        "--jobs",
        str(args.jobs),
        "--no-progress",
        "--timeout",
        "600",
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{mode} grid failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    runs = [dump(r) for r in LedgerFolder(out).runs()]
    return wall, runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default="strands,langgraph,crewai")
    ap.add_argument("--tasks", default="fix-float-add")
    ap.add_argument("--models", default="diligent")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    # Build the venvs first so neither mode pays for installation.
    subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "venvs", "--frameworks", args.frameworks], cwd=ROOT, check=True
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="claimgrid-bench-") as tmp:
        for mode in ("fresh", "warm"):
            wall, runs = run_grid(mode, Path(tmp) / mode, args)
            agent = [r["timings"]["agent_s"] for r in runs]
            # Per-run overhead: the agent process's wall time minus the time spent inside
            # adapter.run (interpreter start, imports, fork, outcome hand-back, exit).
            overhead = [
                r["timings"]["agent_s"] - r["timings"]["adapter_run_s"]
                for r in runs
                if r["timings"].get("adapter_run_s") is not None
            ]
            results[mode] = {
                "runs": len(runs),
                "wall": wall,
                "per_run": wall / len(runs) * args.jobs,
                "agent_median": statistics.median(agent),
                "overhead_median": statistics.median(overhead) if overhead else float("nan"),
                "classes": {r["run_id"]: r["classification"] for r in runs},
            }
    fresh, warm = results["fresh"], results["warm"]
    same = sum(fresh["classes"][k] == warm["classes"].get(k) for k in fresh["classes"])
    print(
        f"date: {time.strftime('%Y-%m-%d')}  matrix: {args.frameworks} x {args.tasks} x 4 content x 4 swap x "
        f"{args.models}  jobs: {args.jobs}"
    )
    print(
        f"{'mode':<6} {'runs':>5} {'grid wall s':>12} {'s per run (x jobs)':>19} "
        f"{'median agent process s':>23} {'median per-run overhead s':>26}"
    )
    for mode, r in results.items():
        print(
            f"{mode:<6} {r['runs']:>5} {r['wall']:>12.1f} {r['per_run']:>19.2f} {r['agent_median']:>23.2f} "
            f"{r['overhead_median']:>26.3f}"
        )
    print(
        f"ratio fresh/warm: per-run overhead {fresh['overhead_median'] / warm['overhead_median']:.1f}x, "
        f"agent process {fresh['agent_median'] / warm['agent_median']:.1f}x, "
        f"grid wall per run {fresh['per_run'] / warm['per_run']:.1f}x "
        "(grid wall includes the one-off venv check, gateway start and warm-parent preload)"
    )
    print(f"identical classifications: {same}/{len(fresh['classes'])}")
    return 0 if same == len(fresh["classes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
