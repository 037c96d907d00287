#!/usr/bin/env python3
"""What a turn snapshot costs (claimgrid.verify.snapshots): the time one model call of an
agent with its own tools waits for the harness to read its workspace.

    uv run bench/turn_snapshots.py                 # every task's fixture + synthetic trees
    uv run bench/turn_snapshots.py --files 20000   # the largest synthetic tree (the entry cap)

For each workspace: the first snapshot (every file read and hashed: the start, before the
agent runs), a snapshot with nothing changed (stat only, every hash reused) and one after one
file was rewritten (one file read again), each the median of ``--repeats`` takes, in ms. The
synthetic trees are ``--files`` files of 4 KiB in folders of 100, plus a ``.git`` of the
same size that is walked for the caps but never read. Prints one line per workspace and last,
exactly: ``largest: N files, first X ms, unchanged Y ms, one file changed Z ms``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.inputs.tasks import load_tasks  # noqa: E402
from claimgrid.verify.snapshots import TurnSnapshots  # noqa: E402


def _ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(ws: Path, repeats: int) -> tuple[int, float, float, float]:
    """(files, first, unchanged, one changed) in ms for the workspace ``ws``."""
    first = _ms(lambda: TurnSnapshots(ws).take(), repeats)
    snaps = TurnSnapshots(ws)
    snaps.take()
    files = len(snaps.snapshots[-1].files or {})
    unchanged = _ms(lambda: snaps.take(0), repeats)
    victim = next(p for p in sorted(ws.rglob("*")) if p.is_file() and ".git" not in p.parts)
    data = victim.read_bytes()

    times = []
    for i in range(repeats):  # only the take is timed, not the rewrite before it
        victim.write_bytes(data + b"#" * (i + 1))
        t0 = time.perf_counter()
        snaps.take(1)
        times.append((time.perf_counter() - t0) * 1000)
    victim.write_bytes(data)
    changed = statistics.median(times)
    return files, first, unchanged, changed


def synthetic(root: Path, files: int) -> Path:
    ws = root / f"synthetic-{files}"
    for tree in ("src", ".git/objects"):
        for i in range(files):
            folder = ws / tree / f"d{i // 100:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i:05d}.py").write_bytes(bytes([65 + i % 26]) * 4096)
    return ws


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=9_000, help="files of the largest synthetic tree")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = []
        for task in load_tasks().values():
            ws = root / task.id
            shutil.copytree(task.repo, ws, symlinks=True)
            rows.append((f"task {task.id}", *measure(ws, args.repeats)))
        for n in sorted({1_000, args.files}):
            rows.append((f"synthetic {n} x 4 KiB (+ .git)", *measure(synthetic(root, n), args.repeats)))
    for name, files, first, unchanged, changed in rows:
        print(
            f"{name:45} {files:6} files  first {first:8.1f} ms  unchanged {unchanged:7.1f} ms  "
            f"one changed {changed:7.1f} ms"
        )
    name, files, first, unchanged, changed = rows[-1]
    print(
        f"largest: {files} files, first {first:.0f} ms, unchanged {unchanged:.0f} ms, one file changed {changed:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
