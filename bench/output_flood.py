#!/usr/bin/env python3
"""The adapter's peak memory while one ``run_command`` prints without end.

    uv run bench/output_flood.py [--timeout 30] [--command "cat /dev/zero"] [--guard on|off]

Starts a fresh interpreter that builds the real harness tool layer (frameworks/_harness,
as an adapter process does), runs ``--command`` through ``run_command`` with the given
command timeout (default: the runner's, 30 s) and reports that process's own peak
resident memory (``ru_maxrss``), the bytes the command printed and what the tool kept.
Target: under 100 MB for ``cat /dev/zero`` over the whole timeout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
import harness_tools as ht
ws, timeout, command, spec = sys.argv[2], float(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ctl = {"workspace": ws, "sandbox": ws + ".sandbox", "tools": ["run_command"],
       "budgets": {"command_timeout_s": timeout}, "command_sandbox": spec}
channel = ht.ToolChannel(None)
tool = ht.make_tools(ctl, channel)[0]
t0 = time.monotonic()
text = tool(command=command)
wall = time.monotonic() - t0
event = channel.events[-1]
print(json.dumps({"peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "start_kb": before,
                  "wall_s": round(wall, 2), "output_bytes": event.get("output_bytes"),
                  "output_cut": event.get("output_cut"), "timed_out": event.get("timed_out"),
                  "result_chars": len(text)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=30.0, help="command timeout in seconds (default: 30)")
    ap.add_argument("--command", default="cat /dev/zero")
    ap.add_argument("--guard", choices=("on", "off"), default="on")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from claimgrid.inputs.tasks import ensure_task_envs, in_suite, load_tasks
    from claimgrid.launch.confine import command_sandbox, hand_over
    from claimgrid.sandbox.guard import detect

    with tempfile.TemporaryDirectory(prefix="cg-flood-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        Path(str(ws) + ".sandbox").mkdir()
        spec = None
        if args.guard == "on":
            task = next(iter(in_suite(load_tasks(), "default").values()))
            ensure_task_envs([task])
            guard = detect("on")
            hand_over(guard, ws)
            spec = command_sandbox(guard, ws, task.python, args.timeout)
        t0 = time.monotonic()
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(ROOT / "frameworks" / "_harness"),
                str(ws),
                str(args.timeout),
                args.command,
                json.dumps(spec),
            ],
            capture_output=True,
            text=True,
            timeout=args.timeout + 60,
        )
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        r = json.loads(out.stdout)
    peak_mb = r["peak_kb"] / 1024
    print(f"command: {args.command!r}, timeout {args.timeout:g} s, guard {args.guard}")
    print(
        f"ran {r['wall_s']} s (timed out: {r['timed_out']}); printed {r['output_bytes']:,} bytes; "
        f"kept {r['result_chars']:,} characters for the model (cut: {r['output_cut']})"
    )
    print(
        f"adapter-side process peak RSS: {peak_mb:.1f} MB (at start {r['start_kb'] / 1024:.1f} MB); "
        f"target < 100 MB: {'met' if peak_mb < 100 else 'NOT met'}  [{time.monotonic() - t0:.0f} s in all]"
    )
    return 0 if peak_mb < 100 else 1


if __name__ == "__main__":
    sys.exit(main())
