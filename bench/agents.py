#!/usr/bin/env python3
"""Each coding agent's run wall time on one task, through the real grid.

    uv run bench/agents.py [--venvs venvs.toml] [--task fix-float-add] [--model diligent] [--repeats 5]
                           [--goal 10] [--frameworks a,b]

For every ``kind = "cli"`` entry of venvs.toml (the coding agents: none is named here; narrow
with ``--frameworks``) it runs ``grid.py run --frameworks X --tasks TASK --content clean --swap
none --models MODEL --repeats N`` (guard as the grid's default), one grid per agent, one after
the other, and prints per agent the median, lowest and highest run wall time read back from
the ledger's records (``timings.wall_s``: the run's own wall time, the verifier included; the
driver's start-up and the venv checks are not in it), the median of ``timings.agent_s`` (the
adapter process alone), how many runs passed, and the median's ratio to the goal (``--goal``,
10 s: issue 44). The load average before and after is printed: the machine is shared, read the
ratios. Exit status 1 when an agent's grid fails or any agent's median is over the goal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.inputs.venvs import load_venvs  # noqa: E402 - venvs.toml's one reader
from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def agent_grid(name: str, out: Path, args: argparse.Namespace) -> tuple[float, list[dict]]:
    """One agent's grid; (the grid command's wall time, its run records)."""
    cmd = [
        sys.executable,
        str(ROOT / "grid.py"),
        "run",
        "--venvs",
        str(args.venvs),
        "--frameworks",
        name,
        "--tasks",
        args.task,
        "--content",
        "clean",
        "--swap",
        "none",
        "--models",
        args.model,
        "--repeats",
        str(args.repeats),
        "--out",
        str(out),
        "--no-progress",
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"bench/agents.py: the grid of {name} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return wall, [r.model_dump(mode="json") for r in LedgerFolder(out).runs()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml")
    ap.add_argument("--task", default="fix-float-add")
    ap.add_argument("--model", default="diligent")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--goal", type=float, default=10.0, help="seconds a median run may take (issue 44: 10)")
    ap.add_argument("--frameworks", default="", help="comma-separated subset of the cli entries")
    args = ap.parse_args()
    agents = [e.name for e in load_venvs(args.venvs).values() if e.is_cli]
    if args.frameworks:
        wanted = [n for n in args.frameworks.split(",") if n]
        unknown = sorted(set(wanted) - set(agents))
        if unknown:
            sys.exit(f'bench/agents.py: --frameworks: not a kind = "cli" entry of {args.venvs}: {", ".join(unknown)}')
        agents = [n for n in agents if n in wanted]
    if not agents:
        sys.exit(f'bench/agents.py: {args.venvs}: no kind = "cli" entry')
    print(f"{args.task}, model {args.model}, {args.repeats} runs per agent, guard default; load average {load()}")
    print(
        f"{'agent':<16} {'median s':>9} {'min s':>7} {'max s':>7} {'agent_s':>8} {'passed':>7} "
        f"{'grid s':>7} {'/ goal':>7}"
    )
    over, recorded = [], {}
    with tempfile.TemporaryDirectory(prefix="cg-bench-agents-") as tmp:
        for name in agents:
            grid_s, runs = agent_grid(name, Path(tmp) / name, args)
            walls = [float(r["timings"]["wall_s"]) for r in runs]
            agent_s = [float(r["timings"]["agent_s"]) for r in runs]
            passed = sum(1 for r in runs if r["classification"].get("outcome") == "PASS")
            median = statistics.median(walls)
            if median > args.goal:
                over.append(name)
            recorded[f"{name}: median run wall time, {args.task}, {args.model} (goal {args.goal:g} s)"] = (
                f"{median:.2f} s ({passed}/{len(runs)} passed)"
            )
            print(
                f"{name:<16} {median:9.2f} {min(walls):7.2f} {max(walls):7.2f} {statistics.median(agent_s):8.2f} "
                f"{passed:>3}/{len(runs):<3} {grid_s:7.1f} {median / args.goal:7.2f}"
            )
    print(
        f"load average after: {load()}; goal {args.goal:g} s: "
        + (f"over in {', '.join(over)}" if over else "every agent's median within it")
    )
    if not args.frameworks:  # a subset is a trial, not the table's figure
        from _figures import record  # bench/, the script's own folder

        record("agents.py", recorded)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
