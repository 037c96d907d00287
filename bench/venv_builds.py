#!/usr/bin/env python3
"""The framework venvs built one after the other against a bounded pool, in one run.

    uv run bench/venv_builds.py [--frameworks a,b,...] [--rounds 1] [--warm-cache]

Each mode builds the selected ``venvs.toml`` entries (default: the default matrix's) into a
new folder of its own, with a new empty uv cache (every package downloaded, as on a fresh
machine; ``--warm-cache``: the machine's cache, so only the linking and compilation are
measured), through the same code ``grid.py`` uses: ``ensure_venvs`` (one after the other,
as before) and ``build_all`` (``claimgrid.inputs.venvs.Builds``, the pool ``grid.py run``
builds with in the background). Modes alternate over ``--rounds``, so a neighbour's load
falls on both. Prints each mode's wall time, when the first venv was ready, the CPU of the
uv processes (reaped children) and the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.inputs.venvs import Builds, default_frameworks, ensure_venvs, load_venvs  # noqa: E402


def _venvs_toml(dest: Path, names: list[str]) -> Path:
    """A venvs.toml in ``dest`` naming the repo's projects (its venvs go to ``dest/.venvs``)."""
    entries = load_venvs()
    text = []
    for name in names:
        e = entries[name]
        text.append(f'[frameworks.{name}]\npython = "{e.python}"\nproject = "{e.project}"\nadapter = "{e.adapter}"\n')
        if e.kind == "cli":
            raise SystemExit(f"{name}: a coding agent's npm entry is not measured here")
    path = dest / "venvs.toml"
    path.write_text("\n".join(text))
    return path


def _cpu() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def _one(mode: str, names: list[str], warm: bool) -> tuple[float, float, float]:
    tmp = Path(tempfile.mkdtemp(prefix=f"claimgrid-venvs-{mode}-"))
    saved = os.environ.get("UV_CACHE_DIR")
    if not warm:
        (tmp / "uv-cache").mkdir()
        os.environ["UV_CACHE_DIR"] = str(tmp / "uv-cache")
    try:
        entries = load_venvs(_venvs_toml(tmp, names))
        cpu0, t0 = _cpu(), time.monotonic()
        if mode == "one after the other":
            first = None
            for name, entry in entries.items():
                ensure_venvs({name: entry})
                first = first or time.monotonic() - t0
        else:
            builds = Builds(entries).start()
            first = None
            while not builds.done():
                builds.wait(0.2)
                builds.changes()
                if first is None and any(builds.state(n) == "ready" for n in entries):
                    first = time.monotonic() - t0
            builds.join()
            failed = [builds.error(n) for n in entries if builds.state(n) != "ready"]
            if failed:
                raise SystemExit(failed[0])
            first = first or time.monotonic() - t0
        return time.monotonic() - t0, first, _cpu() - cpu0
    finally:
        if saved is None:
            os.environ.pop("UV_CACHE_DIR", None)
        else:
            os.environ["UV_CACHE_DIR"] = saved
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", help="comma-separated (default: the default matrix's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warm-cache", action="store_true")
    args = ap.parse_args()
    names = args.frameworks.split(",") if args.frameworks else list(default_frameworks(load_venvs()))
    load = os.getloadavg()
    print(
        f"{len(names)} venvs ({', '.join(names)}), {'warm' if args.warm_cache else 'empty'} uv cache, "
        f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    results: dict[str, list[tuple[float, float, float]]] = {}
    for r in range(args.rounds):
        for mode in ("one after the other", "pool"):
            got = _one(mode, names, args.warm_cache)
            results.setdefault(mode, []).append(got)
            print(
                f"round {r + 1} {mode:<20} wall {got[0]:6.1f} s  first ready {got[1]:6.1f} s  uv CPU {got[2]:6.1f} s",
                flush=True,
            )
    mean = {m: [sum(v[i] for v in vs) / len(vs) for i in range(3)] for m, vs in results.items()}
    seq, pool = mean["one after the other"], mean["pool"]
    print(
        f"pool / one after the other: wall {pool[0] / seq[0]:.2f}, first ready {pool[1] / seq[1]:.2f}, "
        f"CPU {pool[2] / seq[2]:.2f}; load average after {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
