#!/usr/bin/env python3
"""A newcomer's first grid, timed: a fresh clone, an empty uv cache, `uv run grid.py`.

    uv run bench/fresh_clone.py [--commit HEAD] [--keep] [-- GRID ARGS ...]

Clones this repository (its committed ``--commit``, default HEAD) into a temporary folder,
points ``UV_CACHE_DIR`` at a new empty folder (every package comes from the registry) and
runs the README's command, ``uv run grid.py`` (the default matrix; ``-- ARGS`` are passed
on, e.g. ``-- run --frameworks pydantic-ai``), exactly as a newcomer would, then prints when
each step ended, in seconds after ``uv run`` was started:

* the driver's venv: until ``uv`` started the interpreter running ``grid.py`` (seen in
  ``/proc``: uv's child process; what ``uv run`` installs before it);
* the task environments and the grid's start: the ``grid <folder>`` line of its output;
* each framework venv: when its build started and ended (``meta.json`` ``venv_builds``,
  built in the background while other frameworks run);
* the first run started (the earliest ``timings.started_unix`` in ``runs.jsonl``), the
  last run ended, and when ``grid.py`` exited with its ledger written.

It also prints the machine's load average before and after (the cores may be shared) and
the CPU the whole process tree used (``RUSAGE_CHILDREN``: sandboxed processes may be
missed, bench/README.md "Throughput"). The clone and the cache are removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    return out


def _runs_grid(pid: int) -> bool:
    """``pid`` is the interpreter running grid.py (uv also starts Python to query it first)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(b"grid.py") for a in argv[1:3])


def _runs(folder: Path) -> list[dict]:
    """The clone's runs by this checkout's store reader (a torn last line is not a run)."""
    sys.path.insert(0, str(ROOT))
    from claimgrid.store import LedgerFolder
    from claimgrid.store.record import dump

    return [dump(r) for r in LedgerFolder(folder).runs()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="HEAD", help="the commit of this repository to clone (default HEAD)")
    ap.add_argument("--keep", action="store_true", help="keep the clone and the uv cache")
    ap.add_argument(
        "grid_args", nargs="*", help="after --: arguments for grid.py (default: none, the README's command)"
    )
    args = ap.parse_args()
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="claimgrid-fresh-"))
    clone, cache = tmp / "claimgrid", tmp / "uv-cache"
    cache.mkdir()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", sha], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_", "PYTEST"))}
    env["UV_CACHE_DIR"] = str(cache)
    load_before = os.getloadavg()
    cmd = ["uv", "run", "grid.py", *args.grid_args]
    print(
        f"fresh clone of {sha[:12]} in {clone}, empty uv cache {cache}; {os.cpu_count()} cores; "
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}",
        flush=True,
    )
    print(f"$ {' '.join(cmd)}", flush=True)
    t0_unix, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    driver_s = None
    while proc.poll() is None:
        if driver_s is None and any(_runs_grid(c) for c in _children(proc.pid)):
            driver_s = time.monotonic() - t0
        time.sleep(0.05)
    exit_s = time.monotonic() - t0
    reader.join(timeout=10)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()

    grid_line = next(((t, ln) for t, ln in lines if ln.startswith("grid ") and "/ledger/" in ln), None)
    folders = sorted((clone / "ledger").glob("*/meta.json"))
    if not folders:
        print("\n".join(ln for _, ln in lines[-30:]))
        print(f"no ledger written (exit {proc.returncode})", file=sys.stderr)
        return 1
    folder = folders[-1].parent
    meta = json.loads((folder / "meta.json").read_text())
    runs = _runs(folder)
    starts = sorted(r["timings"]["started_unix"] for r in runs)
    ends = [r["timings"]["started_unix"] + r["timings"]["wall_s"] for r in runs]

    def at(unix: float | None) -> str:
        return "-" if unix is None else f"{unix - t0_unix:7.1f} s"

    print(
        f"\nexit {proc.returncode}; {len(runs)} of {meta.get('grid_size')} runs recorded; harness errors "
        f"{len(meta.get('harness_errors') or [])}; venv failures {len(meta.get('venv_failures') or [])}"
    )
    print(f"driver venv (uv run, until grid.py started)    {driver_s if driver_s is not None else float('nan'):7.1f} s")
    if lines:
        print(f"grid.py's first line of output                 {lines[0][0]:7.1f} s  ({lines[0][1][:60]})")
    if grid_line:
        print(f"task envs, preflight, grid start (its line)    {grid_line[0]:7.1f} s")
    builds = meta.get("venv_builds") or {}
    for name, b in sorted(builds.items(), key=lambda kv: kv[1].get("ended_unix") or 0):
        built = "built" if b.get("built") else "current"
        print(
            f"  venv {name:<16} {b.get('state'):<7} {built:<8} started {at(b.get('started_unix'))}  "
            f"ended {at(b.get('ended_unix'))}"
        )
    ended = [b["ended_unix"] for b in builds.values() if b.get("ended_unix")]
    if ended:
        print(f"framework venvs: first ready {at(min(ended))}, all ended {at(max(ended))}")
    if starts:
        print(f"first run started                              {at(starts[0])}")
        print(f"last run ended                                 {at(max(ends))}")
    print(f"grid.py exited, ledger written                 {exit_s:7.1f} s")
    if starts and ended:
        print(
            f"split: driver venv {driver_s or 0:.1f} s; until the first run {starts[0] - t0_unix:.1f} s; "
            f"framework venvs building {max(ended) - t0_unix - (driver_s or 0):.1f} s (overlapping runs); "
            f"runs {max(ends) - starts[0]:.1f} s; ledger after the last run {exit_s - (max(ends) - t0_unix):.1f} s"
        )
    print(
        f"CPU of the process tree (reaped): user {usage.ru_utime:.1f} s, system {usage.ru_stime:.1f} s; "
        f"load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
    )
    if not args.grid_args and proc.returncode == 0 and starts and ended:  # the README's command
        from _figures import record  # bench/, the script's own folder

        record(
            "fresh_clone.py",
            {
                "first run started after `uv run grid.py` (empty uv cache)": f"{starts[0] - t0_unix:.1f} s",
                "framework venvs all built": f"{max(ended) - t0_unix:.1f} s",
                "whole default grid, ledger written": f"{exit_s:.1f} s ({len(runs):,} runs; harness errors "
                f"{len(meta.get('harness_errors') or [])})",
            },
        )
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
