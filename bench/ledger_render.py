#!/usr/bin/env python3
"""Ledger rendering cost and output sizes, for a real ledger and for it scaled to every framework.

    uv run bench/ledger_render.py LEDGER_DIR [--scale-to-frameworks]

Renders ``LEDGER_DIR`` (a copy of it: the original is not touched) and prints the
render time per run and the sizes of LEDGER.md, RUNS.md, ledger.html and heatmap.svg.
With ``--scale-to-frameworks``, the copy holds the ledger's records and evidence once
per framework named in venvs.toml (run ids renamed, evidence copied), which gives the
default matrix's size (e.g. 320 one-framework runs -> 960) without running anything;
its frameworks are identical by construction, so it measures size and time, not findings.
Prints render seconds per run over grid wall seconds per run of the source grid (its
meta.json), both measured on this machine: the share of a grid's time spent rendering.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.store import LedgerFolder, RunStore  # noqa: E402 - the store's one reader, and its writer
from claimgrid.store.record import dump  # noqa: E402


def scaled_copy(src: Path, dst: Path) -> int:
    frameworks = list(tomllib.loads((ROOT / "venvs.toml").read_text())["frameworks"])
    meta = json.loads((src / "meta.json").read_text())
    records = [dump(r) for r in LedgerFolder(src).runs()]
    (dst / "runs").mkdir(parents=True)
    out = []
    for fw in frameworks:
        for rec in records:
            old = rec["framework"]
            rid = rec["run_id"].replace(f"{old}.", f"{fw}.", 1)
            new = {**rec, "framework": fw, "run_id": rid, "evidence_dir": f"runs/{rid}"}
            shutil.copytree(src / rec["evidence_dir"], dst / "runs" / rid)
            out.append(new)
    meta["frameworks"] = {fw: (meta.get("frameworks") or {}).get(fw, {}) for fw in frameworks}
    meta["grid_size"] = len(out)
    (dst / "meta.json").write_text(json.dumps(meta, indent=2))
    RunStore(dst).rewrite(out)  # the store's writer (unsealed: the copy has no publisher's key)
    return len(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("ledger", type=Path)
    ap.add_argument("--scale-to-frameworks", action="store_true")
    args = ap.parse_args()
    from claimgrid.ledger import (
        heatmap,  # noqa: F401 - imports are not render time
        render_ledger,
    )

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / args.ledger.name
        if args.scale_to_frameworks:
            n = scaled_copy(args.ledger, work)
        else:
            shutil.copytree(args.ledger, work)
            n = len(LedgerFolder(work).runs())
        t0 = time.perf_counter()
        render_ledger(work)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        render_ledger(work)
        second = time.perf_counter() - t0
        print(f"runs: {n}")
        print(f"render: {first:.2f} s first, {second:.2f} s again ({1000 * second / max(n, 1):.1f} ms per run)")
        for name in ("LEDGER.md", "RUNS.md", "ledger.html", "heatmap.svg"):
            p = work / name
            print(f"{name}: {p.stat().st_size / 1024:.0f} KiB" if p.exists() else f"{name}: absent")
        wall = json.loads((args.ledger / "meta.json").read_text()).get("wall_s")
        src = len(LedgerFolder(args.ledger).runs())
        if isinstance(wall, (int, float)) and wall > 0 and src:
            print(
                f"render s per run / grid wall s per run (source grid, {src} runs in {wall} s): "
                f"{(first / n) / (wall / src):.3f} first render, {(second / n) / (wall / src):.3f} re-render"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
