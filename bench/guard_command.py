#!/usr/bin/env python3
"""Added time per ``run_command`` with the guard (bubblewrap sandbox) vs without.

    uv run bench/guard_command.py [--n 40] [--command "true"]

Runs the same command through the real tool layer (frameworks/_harness, in-process)
``--n`` times unguarded (``bash -c`` as today, as ``nobody`` when root) and ``--n``
times guarded (the argv prefix ``claimgrid.launch.confine.command_sandbox`` gives a run),
interleaved so machine load hits both alike, and prints the medians, their difference
(the guard's added milliseconds per command; target <= 30 ms) and their ratio. Absolute
numbers are this machine's; the difference measured back to back is what matters.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "frameworks" / "_harness"))

import harness_tools as ht  # noqa: E402

from claimgrid.inputs.tasks import ensure_task_envs, in_suite, load_tasks  # noqa: E402
from claimgrid.launch.confine import command_sandbox, hand_over  # noqa: E402
from claimgrid.sandbox.guard import detect  # noqa: E402


def tool(ws: Path, spec) -> ht.HarnessTool:
    ctl = {
        "workspace": str(ws),
        "sandbox": str(ws.parent / "sandbox"),
        "tools": ["run_command"],
        "budgets": {"command_timeout_s": 30},
        "command_sandbox": spec,
    }
    return ht.make_tools(ctl, ht.ToolChannel(None))[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--command", default="true")
    args = ap.parse_args()
    guard = detect("on")
    task = next(iter(in_suite(load_tasks(), "default").values()))
    ensure_task_envs([task])
    python = task.python
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name in ("unguarded", "guarded"):
            ws = Path(tmp) / name / "ws"
            ws.mkdir(parents=True, mode=0o777)
            (ws.parent / "sandbox").mkdir()
            if name == "guarded":
                hand_over(guard, ws)
            runs[name] = tool(ws, command_sandbox(guard, ws, python, 30) if name == "guarded" else None)
        times = {name: [] for name in runs}
        for i in range(args.n + 2):
            for name, run in runs.items():
                t0 = time.perf_counter()
                out = run(command=args.command)
                dt = time.perf_counter() - t0
                assert "[exit code 0]" in out, out
                if i >= 2:  # warm-up: first page-ins
                    times[name].append(dt)
    med = {name: statistics.median(v) * 1000 for name, v in times.items()}
    print(
        f"run_command {args.command!r}, {args.n} calls each, interleaved; tool-layer overhead "
        "(workspace snapshots, event) included in both"
    )
    for name in runs:
        print(
            f"  {name:<10} median {med[name]:7.1f} ms   p90 {statistics.quantiles(times[name], n=10)[-1] * 1000:7.1f} ms"
        )
    print(
        f"  guard adds {med['guarded'] - med['unguarded']:+.1f} ms per command "
        f"(ratio {med['guarded'] / med['unguarded']:.2f}x; target <= 30 ms)"
    )
    from _figures import record  # bench/, the script's own folder

    record(
        "guard_command.py",
        {
            f"the guard's added time per run_command ({args.command!r}, median)": f"{med['guarded'] - med['unguarded']:+.1f} ms ({med['guarded'] / med['unguarded']:.2f}x; target <= 30 ms)",
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
