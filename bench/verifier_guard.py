#!/usr/bin/env python3
"""What the guard adds to one verifier test run, measured in one go.

    uv run bench/verifier_guard.py [--task fix-float-add] [--n 30]

On one real fixed workspace, re-runs the task's test command ``n`` times in each of
three ways, interleaved (so a noisy shared machine hurts each alike):

* ``in place``: the pre-guard verifier (the test command as the driver's user, in the
  agent's workspace itself);
* ``guard off``: today's unguarded verifier (a throwaway copy of the workspace);
* ``guard on``: today's default (bwrap, nobody, no network, limits, a throwaway overlay).

Prints the median and p90 per run of each, and the added time of ``guard on`` over
``in place`` (target <= 30 ms). It also prints the diff step (the harness's own
reading of the workspace) so the whole verifier's cost is visible. Absolute numbers are
not portable; the differences measured back to back are.
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

from claimgrid.inputs.tasks import build_template, load_tasks, materialise, seal_template  # noqa: E402
from claimgrid.sandbox.guard import detect  # noqa: E402
from claimgrid.verify.verifier import run_tests, workspace_diff  # noqa: E402


def in_place(command, ws, timeout_s):
    """The pre-guard verifier's test run, as it was (for the comparison only)."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        return (
            subprocess.run(
                command, cwd=ws, env=env, capture_output=True, timeout=timeout_s, start_new_session=True
            ).returncode
            == 0
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="fix-float-add")
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    guard = detect("auto")
    if not guard.enabled:
        sys.exit(f"the guard is unavailable here ({guard.reason}); nothing to compare")
    task = load_tasks()[args.task]
    command = task.test_command()
    if not command:
        sys.exit(f"task {args.task} has no test command")
    with tempfile.TemporaryDirectory() as tmp:
        template, ws = Path(tmp) / "template", Path(tmp) / "ws"
        base = build_template(task, task.slot_text(), template)
        materialise(template, ws, seal_template(template))
        for step in task.spec.reference.steps:  # the reference solution, so the tests run for real
            if step.tool == "edit_file":
                p = ws / step.args["path"]
                p.write_text(p.read_text().replace(step.args["old"], step.args["new"]))
            elif step.tool == "write_file":
                (ws / step.args["path"]).parent.mkdir(parents=True, exist_ok=True)
                (ws / step.args["path"]).write_text(step.args["content"])
        off = detect("off")
        ways = {
            "in place": lambda: in_place(command, ws, 60),
            "guard off": lambda: run_tests(command, ws, 60, off, task.python)["passed"],
            "guard on": lambda: run_tests(command, ws, 60, guard, task.python)["passed"],
            "diff step": lambda: workspace_diff(template, ws, base)["files"] is not None,
            # the sandbox alone, to tell its start-up from the interpreter's
            "true direct": lambda: subprocess.run(["/bin/true"]).returncode == 0,
            "true guarded": lambda: subprocess.run(guard.wrap(["/bin/true"], workspace=ws)).returncode == 0,
        }
        times = {name: [] for name in ways}
        for name, fn in ways.items():  # warm-up, and every way must work
            if not fn():
                sys.exit(f"{name}: the test run did not pass on the reference solution")
        for _ in range(args.n):
            for name, fn in ways.items():
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1000)

    def stats(xs):
        xs = sorted(xs)
        return statistics.median(xs), xs[int(0.9 * (len(xs) - 1))], xs[0]

    print(f"verifier test run of {args.task} ({' '.join(command[1:])}), n={args.n} each, interleaved")
    print(
        f"guard: {guard.facts()['bwrap']} ({guard.version}), as root: {guard.as_root}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a loaded machine inflates every figure)"
    )
    print(f"{'way':<14}{'median ms':>10}{'p90 ms':>10}{'min ms':>10}")
    for name, xs in times.items():
        med, p90, low = stats(xs)
        print(f"{name:<14}{med:>10.1f}{p90:>10.1f}{low:>10.1f}")
    # the minimum is the least noisy estimate of the intrinsic cost on a shared machine
    print(
        f"sandbox start alone: {stats(times['true guarded'])[0] - stats(times['true direct'])[0]:+.1f} ms median, "
        f"{stats(times['true guarded'])[2] - stats(times['true direct'])[2]:+.1f} ms min"
    )
    base = stats(times["in place"])
    for name in ("guard off", "guard on"):
        st = stats(times[name])
        print(
            f"added by {name:<10}: {st[0] - base[0]:+.1f} ms median, {st[2] - base[2]:+.1f} ms min per test run "
            f"(x{st[0] / base[0]:.2f}; target for guard on <= +30 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
