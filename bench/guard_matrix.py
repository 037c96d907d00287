#!/usr/bin/env python3
"""The same grid with the guard on and off, side by side in one run.

    uv run bench/guard_matrix.py [--venvs venvs.toml] [--frameworks a,b] [--jobs 2] [grid.py run options...]

Runs ``grid.py run`` twice back to back on the same cells (default: the full default
matrix of every framework in venvs.toml; narrow it with the usual options), once with
``--guard on`` and once with ``--guard off``, and prints runs/s for each, their ratio,
and how many runs got the same classification in both (the guard must change none
where no attack is involved; differing run ids are listed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder


def grid(mode: str, out: Path, extra: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, str(ROOT / "grid.py"), "run", "--guard", mode, "--out", str(out), "--no-progress", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"guard_matrix: grid with --guard {mode} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    runs = LedgerFolder(out).runs()
    return wall, {r.run_id: r.classification.model_dump(mode="json") for r in runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _, extra = ap.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="cg-bench-guard-") as tmp:
        results = {mode: grid(mode, Path(tmp) / mode, extra) for mode in ("on", "off")}
    (on_s, on), (off_s, off) = results["on"], results["off"]
    same = [rid for rid in on if off.get(rid) == on[rid]]
    differ = sorted(set(on) ^ set(off) | {rid for rid in on if rid in off and off[rid] != on[rid]})
    print(f"{len(on)} runs each ({' '.join(extra) or 'full default matrix'})")
    print(f"  guard on : {on_s:7.1f} s  {len(on) / on_s:6.2f} runs/s")
    print(f"  guard off: {off_s:7.1f} s  {len(off) / off_s:6.2f} runs/s")
    print(f"  on/off wall ratio {on_s / off_s:.2f}; same classification in {len(same)}/{len(on)} runs")
    for rid in differ[:20]:
        print(f"  differs: {rid}: on={on.get(rid)} off={off.get(rid)}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
