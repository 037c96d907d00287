#!/usr/bin/env python3
"""What the verify cache saves, measured in one go.

    uv run bench/verify_cache.py                       # plain × default tasks × all conditions
    uv run bench/verify_cache.py --models diligent,overclaimer,narrator,reader
    uv run bench/verify_cache.py -- --tasks fix-float-add     # any further grid.py run flags

Runs the same grid twice through ``grid.py run`` (subprocesses, ``--jobs 1`` so each run's
verifier CPU is its own): once with the verify cache (the default), once with
``--no-verify-cache``. Both with ``--guard off`` unless ``--guard`` says otherwise: a
guarded test run's processes end inside bwrap's pid namespace and are never reaped up to
the driver, so their CPU reaches neither ``RUSAGE_CHILDREN`` nor ``wait4`` (measured: 0.002 s
per guarded test run against 0.046 s unguarded for the same command); unguarded, every
process the verifier starts is reaped by the driver and counted. The cache key includes
the guard, so the hit rate is the same either way. From each grid's run records:

* ``timings.verify_cpu_s``: the verifier's CPU for the run (the driver thread's CPU in
  ``verify()`` plus the processes it reaped: git, the sandboxed test run);
* ``verify_cache.status``: hit / miss / off per run with a test command.

Prints per grid the mean verifier CPU per run (all runs, and runs with a test command),
the hit rate, the whole grid's CPU (``wait4`` of ``grid.py``), and last, exactly:
``hit rate H% (h of n test runs); verifier CPU per run: cache X s, no cache Y s (ratio R);
per test run: X' s vs Y' s (ratio R')``. Both grids must classify every run alike (checked).
Absolute numbers are not portable; the ratios measured back to back are.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder
from claimgrid.store.record import dump  # noqa: E402


def run_grid(out: Path, flags: list[str]) -> dict:
    """Run one grid; wall time and the whole process tree's CPU (wait4)."""
    cmd = [sys.executable, str(ROOT / "grid.py"), "run", "--out", str(out), "--no-progress", *flags]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"grid.py failed ({os.waitstatus_to_exitcode(status)}):\n{output[-3000:]}")
    records = [dump(r) for r in LedgerFolder(out).runs()]
    return {"wall_s": time.monotonic() - t0, "cpu_s": usage.ru_utime + usage.ru_stime, "records": records}


def summary(grid: dict) -> dict:
    recs = grid["records"]
    tested = [r for r in recs if r.get("verify_cache")]
    cpu = [r["timings"]["verify_cpu_s"] for r in recs]
    cpu_tested = [r["timings"]["verify_cpu_s"] for r in tested]
    return {
        "runs": len(recs),
        "tested": len(tested),
        "hits": sum(r["verify_cache"]["status"] == "hit" for r in tested),
        "cpu_per_run": statistics.fmean(cpu),
        "cpu_per_test_run": statistics.fmean(cpu_tested) if cpu_tested else 0.0,
        "wall_verify_per_run": statistics.fmean(r["timings"]["verify_s"] for r in recs),
        "grid_cpu_s": grid["cpu_s"],
        "grid_wall_s": grid["wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", default="plain", help="one framework (default: plain, no dependencies)")
    ap.add_argument(
        "--models",
        default="diligent,overclaimer,narrator",
        help="reference models (default: diligent,overclaimer,narrator)",
    )
    ap.add_argument(
        "--guard",
        default="off",
        choices=("off", "auto", "on"),
        help="the grids' --guard (default off: see the module doc for why)",
    )
    ap.add_argument("rest", nargs="*", help="further grid.py run flags, after --")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="claimgrid-bench-vcache-") as tmp:
        venvs = Path(tmp) / "venvs.toml"
        fw = ROOT / "frameworks" / args.framework
        if args.framework == "plain":  # only plain's entry: no other framework venv is checked
            venvs.write_text(f'[frameworks.plain]\npython = "3.11"\nproject = "{fw}"\nadapter = "{fw}/adapter.py"\n')
        else:
            venvs = ROOT / "venvs.toml"
        flags = [
            "--venvs",
            str(venvs),
            "--frameworks",
            args.framework,
            "--models",
            args.models,
            "--jobs",
            "1",
            "--guard",
            args.guard,
            *args.rest,
        ]
        on = summary(grids_on := run_grid(Path(tmp) / "on", flags))
        off = summary(grids_off := run_grid(Path(tmp) / "off", [*flags, "--no-verify-cache"]))
        a = {r["run_id"]: r["classification"] for r in grids_on["records"]}
        b = {r["run_id"]: r["classification"] for r in grids_off["records"]}
        differ = [k for k in a if a[k] != b.get(k)]
        if differ or a.keys() != b.keys():
            sys.exit(f"classifications differ between the grids: {differ[:5]}")
    print(f"guard {args.guard}, --jobs 1, {args.framework} × {args.models}")
    print(f"{'':34} {'cache':>10} {'no cache':>10}")
    for label, key, fmt in (
        ("runs", "runs", "{:>10}"),
        ("runs with a test command", "tested", "{:>10}"),
        ("cache hits", "hits", "{:>10}"),
        ("verifier CPU per run (s)", "cpu_per_run", "{:>10.4f}"),
        ("verifier CPU per test run (s)", "cpu_per_test_run", "{:>10.4f}"),
        ("verifier wall per run (s)", "wall_verify_per_run", "{:>10.4f}"),
        ("whole grid CPU, wait4 (s)", "grid_cpu_s", "{:>10.1f}"),
        ("whole grid wall (s)", "grid_wall_s", "{:>10.1f}"),
    ):
        print(f"{label:34} {fmt.format(on[key])} {fmt.format(off[key])}")
    rate = on["hits"] / on["tested"] if on["tested"] else 0.0
    print(f"classifications identical in all {len(a)} runs")
    print(
        f"hit rate {rate:.0%} ({on['hits']} of {on['tested']} test runs); verifier CPU per run: "
        f"cache {on['cpu_per_run']:.4f} s, no cache {off['cpu_per_run']:.4f} s "
        f"(ratio {on['cpu_per_run'] / off['cpu_per_run']:.2f}); per test run: {on['cpu_per_test_run']:.4f} s vs "
        f"{off['cpu_per_test_run']:.4f} s (ratio {on['cpu_per_test_run'] / max(off['cpu_per_test_run'], 1e-9):.2f})"
    )
    from _figures import record  # bench/, the script's own folder

    record(
        "verify_cache.py",
        {
            f"verifier CPU per run, cache vs none ({args.framework}, guard {args.guard})": f"{on['cpu_per_run']:.4f} s vs {off['cpu_per_run']:.4f} s "
            f"(ratio {on['cpu_per_run'] / off['cpu_per_run']:.2f}; hit rate {rate:.0%})",
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
