#!/usr/bin/env python3
"""The verifier's diff step (``workspace_diff``) on the default tasks, two implementations in one run.

    uv run bench/verifier_diff.py                      # this tree against the revision before git wrote the objects
    uv run bench/verifier_diff.py --before main~3 --repeat 20

For every task of the default suite: its fixture template and a workspace as the grid makes
them, then three workspaces the diff sees, each diffed ``--repeat`` times by both
implementations, alternating: unchanged (the fixture's own tree), one file edited and one
added (an agent's usual change), and every file rewritten (the most blobs a run writes).
``before`` is ``claimgrid/verify/verifier.py`` as it was at ``--before`` (read with ``git
show``, imported beside this tree's modules), ``after`` this tree's. Both must give the same
diff event (file list, tree id) and patch (checked). Time is the driver's CPU plus its
children's (git), and wall time. Prints per case and in total, last exactly:
``diff step: before X ms, after Y ms per diff (ratio after/before R; wall R')``, and records
the CPU figures in bench/README.md's table. Absolute numbers are not portable; the ratios
measured back to back are (git's three processes per changed workspace are the difference).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.execute.spec import DEFAULT_SUITE  # noqa: E402
from claimgrid.inputs.tasks import build_template, in_suite, load_tasks, materialise  # noqa: E402
from claimgrid.verify import verifier as after  # noqa: E402

# The last revision whose verifier wrote blobs and trees itself.
BEFORE = "e2882fc"


def load_before(rev: str):
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:claimgrid/verify/verifier.py"], capture_output=True, check=True
    ).stdout
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("verifier_before", fh.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module by name
    spec.loader.exec_module(module)
    os.unlink(fh.name)
    return module


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def edit_one(ws: Path) -> None:
    files = sorted(p for p in ws.rglob("*") if p.is_file() and ".git" not in p.relative_to(ws).parts)
    with open(files[0], "ab") as fh:
        fh.write(b"\n# edited\n")
    (ws / "added_by_agent.txt").write_text("new\n")


def rewrite_all(ws: Path) -> None:
    for p in ws.rglob("*"):
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(ws).parts:
            with open(p, "ab") as fh:
                fh.write(b"\n")


CASES = {"unchanged": lambda ws: None, "one edited, one added": edit_one, "every file rewritten": rewrite_all}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help=f"the revision to compare with (default {BEFORE})")
    ap.add_argument("--repeat", type=int, default=10, help="diffs per workspace and implementation (default 10)")
    args = ap.parse_args(argv)
    before = load_before(args.before)
    impls = {"before": before, "after": after}
    tasks = in_suite(load_tasks(), DEFAULT_SUITE)
    totals = {name: [0.0, 0.0, 0] for name in impls}
    with tempfile.TemporaryDirectory(prefix="claimgrid-bench-diff-") as tmp:
        for case, mutate in CASES.items():
            per = {name: [0.0, 0.0, 0] for name in impls}
            for task_id, task in tasks.items():
                template = Path(tmp) / f"t-{task_id}"
                if not template.exists():
                    build_template(task, task.slot_text(), template)
                ws = Path(tmp) / f"ws-{task_id}-{len(os.listdir(tmp))}"
                materialise(template, ws)
                mutate(ws)
                base = subprocess.run(
                    ["git", "-C", str(template), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
                ).stdout.strip()
                seen: dict[str, tuple] = {}
                for _ in range(args.repeat):
                    for name, impl in impls.items():
                        patch: list[str] = []
                        c0, w0 = cpu(), time.perf_counter()
                        event = impl.workspace_diff(template, ws, base, patch, {})
                        c1, w1 = cpu(), time.perf_counter()
                        for acc in (per[name], totals[name]):
                            acc[0] += c1 - c0
                            acc[1] += w1 - w0
                            acc[2] += 1
                        seen[name] = (event, patch)
                if seen["before"] != seen["after"]:
                    sys.exit(f"{task_id} ({case}): the two implementations disagree:\n{seen}")
            b, a = per["before"], per["after"]
            print(
                f"{case:24s} before {1000 * b[0] / b[2]:7.2f} ms CPU {1000 * b[1] / b[2]:7.2f} ms wall | "
                f"after {1000 * a[0] / a[2]:7.2f} ms CPU {1000 * a[1] / a[2]:7.2f} ms wall"
            )
    b, a = totals["before"], totals["after"]
    print(
        f"diff step: before {1000 * b[0] / b[2]:.2f} ms, after {1000 * a[0] / a[2]:.2f} ms per diff "
        f"(ratio after/before {a[0] / b[0]:.2f}; wall {a[1] / b[1]:.2f})"
    )
    from _figures import record  # bench/, the script's own folder

    record(
        "verifier_diff.py",
        {
            f"the verifier's diff step, CPU per diff, default tasks, against {args.before}": (
                f"{1000 * b[0] / b[2]:.2f} ms before, {1000 * a[0] / a[2]:.2f} ms after (ratio {a[0] / b[0]:.2f})"
            )
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
