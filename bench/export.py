"""Time ``grid.py export`` of a ledger in both formats, as a share of the grid's own time.

    uv run --extra inspect --extra otel python bench/export.py ledger/<grid id>

Prints one line per format: seconds (wall and CPU of this process) and the ratio to the
grid's wall time recorded in ``meta.json``. The export must stay a small share of running
the grid (the target is under 10% on the default matrix)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from claimgrid.ledger.exports import export_ledger  # noqa: E402
from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder


def main() -> int:
    folder = Path(sys.argv[1])
    wall = float(json.loads((folder / "meta.json").read_text())["wall_s"])
    runs = len(LedgerFolder(folder).runs())
    print(f"ledger {folder}: {runs} runs, grid wall {wall:.1f} s")
    for fmt in ("inspect", "otel"):
        tmp = Path(tempfile.mkdtemp())
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            files = export_ledger(folder, tmp / "out", fmt)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            size = sum(p.stat().st_size for p in files)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        # CPU as well as wall: on a loaded machine the wall time is mostly waiting for a core
        print(
            f"{fmt:8s} {dt:6.1f} s wall {dc:6.1f} s cpu  {size / 1e6:7.1f} MB  "
            f"export/grid: wall {dt / wall:.3f}, cpu {dc / wall:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
