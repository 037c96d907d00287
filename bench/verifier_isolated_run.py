"""What the isolated second test run costs the verifier (claimgrid/verify/childboot.py).

    uv run bench/verifier_isolated_run.py                 # every instrumented task, 3 rounds
    uv run bench/verifier_isolated_run.py --rounds 5 fix-float-add

For each task whose test command the bootstrap instruments (``-m unittest|pytest``), on a
workspace with the reference fix (a pass: both runs happen) and on the unfixed one (a
failure: one run), it times in this one process: one instrumented test run alone
(``run_tests``) and the whole verifier (``verify``: diff, checks, both runs). Prints wall
seconds per call and, last, exactly: ``one test run W1 s, verifier pass W2 s (R2x), verifier
fail W3 s (R3x)``. The guard is on wherever it works (as in a grid).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.inputs.tasks import build_template, load_tasks, materialise  # noqa: E402
from claimgrid.sandbox.guard import detect  # noqa: E402
from claimgrid.verify import tamper  # noqa: E402
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, run_tests, verify  # noqa: E402


def _workspace(task, fixed: bool):
    d = Path(tempfile.mkdtemp(prefix="bench-iso-"))
    base = build_template(task, task.slot_text(), d / "tpl")
    materialise(d / "tpl", d / "ws")
    if fixed:
        for st in task.spec.reference.steps:
            if st.tool == "edit_file":
                p = d / "ws" / st.args["path"]
                p.write_text(p.read_text().replace(st.args["old"], st.args["new"], 1))
    return d / "tpl", d / "ws", base


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tasks = load_tasks()
    chosen = [
        t
        for t in sorted(tasks.values(), key=lambda t: t.id)
        if t.test_command()
        and tamper.runner_of(t.test_command(), t.python)
        and (not args.tasks or t.id in args.tasks)
        and any(s.tool == "edit_file" for s in t.spec.reference.steps)
    ]
    guard = detect("auto")
    sums = {"one": 0.0, "pass": 0.0, "fail": 0.0}
    n = 0
    for _ in range(args.rounds):
        for task in chosen:
            tpl, ws, base = _workspace(task, fixed=True)
            t0 = time.monotonic()
            run_tests(task.test_command(), ws, task.spec.expectation.test_timeout_s, guard, task.python)
            sums["one"] += time.monotonic() - t0
            t0 = time.monotonic()
            verify(task, None, FinishedRun(tpl, ws, base), options=VerifyOptions(guard=guard))
            sums["pass"] += time.monotonic() - t0
            tpl, ws, base = _workspace(task, fixed=False)
            t0 = time.monotonic()
            verify(task, None, FinishedRun(tpl, ws, base), options=VerifyOptions(guard=guard))
            sums["fail"] += time.monotonic() - t0
            n += 1
    one, ok, bad = (sums[k] / n for k in ("one", "pass", "fail"))
    print(f"{len(chosen)} tasks x {args.rounds} rounds, guard {'on' if guard.enabled else 'off'}")
    print(
        f"one test run {one:.3f} s, verifier pass {ok:.3f} s ({ok / one:.2f}x), verifier fail {bad:.3f} s ({bad / one:.2f}x)"
    )


if __name__ == "__main__":
    main()
