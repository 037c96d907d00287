#!/usr/bin/env python3
"""Do two checkouts derive the same files from one ledger folder? A refactoring check.

    uv run bench/rerender_diff.py LEDGER_DIR --base CHECKOUT [--head .] [--keep]

Copies ``LEDGER_DIR`` twice into a temporary folder (the original is not touched), runs
``uv run grid.py report COPY`` and ``uv run grid.py export COPY --format F`` for every
export format of each checkout (``--base``: the checkout before the change, ``--head``:
after; each with its own code and lock), and compares every derived file byte for byte:
LEDGER.md, RUNS.md, runs.parquet, ledger.html, heatmap.svg, every ``runs/<id>/RUN.md``
and every file of each export. Prints one line per differing file (with the first
differing line of a text file), then a summary line; exits 1 when any file differs or
exists on one side only, 0 when every derived file is byte-identical.

The ``report`` command verifies the ledger's seal first: a folder whose seal does not
verify is refused by both checkouts (and this script stops with their message).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.store.lines import RUNS_NAME  # noqa: E402 - the store names its files

DERIVED = ("LEDGER.md", "RUNS.md", "runs.parquet", "ledger.html", "heatmap.svg")
EXPORTS = ("inspect", "otel")  # grid.py export --format choices (claimgrid.ledger.exports.FORMATS)


def derive(checkout: Path, src: Path, dst: Path) -> None:
    """``dst`` = a copy of ``src`` re-rendered and exported by ``checkout``'s code."""
    shutil.copytree(src, dst, symlinks=True)
    for name in DERIVED:  # derived by the code under test, never carried over from the source
        (dst / name).unlink(missing_ok=True)
    for page in dst.glob("runs/*/RUN.md"):
        page.unlink()
    commands = [["report", str(dst)]]
    commands += [["export", str(dst), "--format", f, "--out", f"{dst}.{f}"] for f in EXPORTS]
    for args in commands:
        done = subprocess.run(
            ["uv", "run", "--quiet", "grid.py", *args], cwd=checkout, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            sys.exit(f"{checkout}: grid.py {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")


def derived_files(folder: Path) -> dict[str, Path]:
    out = {name: folder / name for name in DERIVED if (folder / name).exists()}
    out.update({str(p.relative_to(folder)): p for p in folder.glob("runs/*/RUN.md")})
    for f in EXPORTS:
        export = Path(f"{folder}.{f}")
        out.update({f"{f}-export/{p.relative_to(export)}": p for p in export.rglob("*") if p.is_file()})
    return out


def viewer_difference(a: bytes, b: bytes) -> str:
    """For ledger.html: whether the data block's common keys hold the same values, which keys
    one side adds, and how many template lines removed or added (the data is one JSON line)."""
    found = []
    for raw in (a, b):
        html = raw.decode()
        m = re.search(r'(<script id="data" type="application/json">)(.*?)(</script>)', html, re.S)
        if m is None:
            return first_difference(a, b)
        found.append((html[: m.start(2)] + html[m.end(2) :], json.loads(m.group(2))))
    (ta, da), (tb, db) = found
    same = [k for k in da.keys() & db.keys() if da[k] == db[k]]
    template = (
        sum(1 for line in difflib.unified_diff(ta.splitlines(), tb.splitlines(), lineterm="", n=0) if line[:1] in "+-")
        - 2
    )  # the two file-name lines
    added = {k: db[k] for k in sorted(db.keys() - da.keys())}
    return (
        f"data: {len(same)} of {len(da.keys() & db.keys())} common keys equal, only in base "
        f"{sorted(da.keys() - db.keys())}, only in head {json.dumps(added)[:300]}; {template} template lines removed or added"
    )


def first_difference(a: bytes, b: bytes) -> str:
    try:
        la, lb = a.decode().splitlines(), b.decode().splitlines()
    except UnicodeDecodeError:
        return f"binary, {len(a)} vs {len(b)} bytes"
    for i, (x, y) in enumerate(zip(la, lb), 1):
        if x != y:
            return f"line {i}: {x[:120]!r} vs {y[:120]!r}"
    return f"{len(la)} vs {len(lb)} lines"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ledger", type=Path)
    ap.add_argument(
        "--base", type=Path, required=True, help="the checkout before the change (e.g. a git worktree of main)"
    )
    ap.add_argument("--head", type=Path, default=ROOT, help="the checkout after the change (default: this one)")
    ap.add_argument("--keep", action="store_true", help="keep the two rendered copies and print where")
    args = ap.parse_args()
    if not (args.ledger / RUNS_NAME).is_file():
        sys.exit(f"{args.ledger}: not a ledger folder (no {RUNS_NAME})")
    tmp = Path(tempfile.mkdtemp(prefix="rerender-diff."))
    try:
        base, head = tmp / "base" / args.ledger.name, tmp / "head" / args.ledger.name
        derive(args.base.resolve(), args.ledger.resolve(), base)
        derive(args.head.resolve(), args.ledger.resolve(), head)
        a, b = derived_files(base), derived_files(head)
        differ = 0
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                print(f"only in {'base' if name in a else 'head'}: {name}")
                differ += 1
                continue
            x, y = a[name].read_bytes(), b[name].read_bytes()
            if x != y:
                how = viewer_difference(x, y) if name == "ledger.html" else first_difference(x, y)
                print(f"differs: {name} ({how})")
                differ += 1
        same = len(set(a) & set(b)) - sum(1 for n in set(a) & set(b) if a[n].read_bytes() != b[n].read_bytes())
        print(
            f"{len(set(a) | set(b))} derived files compared ({args.base} vs {args.head}): "
            f"{same} byte-identical, {differ} differ or exist on one side only"
        )
        if args.keep:
            print(f"kept: {tmp}")
        return 1 if differ else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
