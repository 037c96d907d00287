"""Are two ledgers' classifications identical, cell by cell? (A change that must not change behaviour.)

    uv run python bench/compare_classifications.py A B

Reads both ledger folders through the store's reader (typed records, last line of a run id
wins) and matches runs by their cell (framework, task, content, swap, model, substitute,
repeat): run ids and delegation ids differ between two grids of the same cells. For each
cell in both, every field of the classification is compared; a cell in one ledger only is a
difference too. Prints one line per difference and a summary line; exit 0 when there is
none, 1 otherwise, 2 for bad input (one line naming the file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.errors import ClaimgridError  # noqa: E402
from claimgrid.store import LedgerFolder, RunRecord  # noqa: E402 - the store's one reader of a ledger folder

CELL = ("framework", "task", "content", "swap", "model", "substitute", "repeat")


def cells(folder: Path) -> dict[tuple, RunRecord]:
    """The ledger's runs by cell; a cell recorded under two run ids is bad input."""
    ledger = LedgerFolder(folder)
    if not ledger.has_runs():
        raise ClaimgridError(f"{folder}: not a ledger folder (no run records)")
    out: dict[tuple, RunRecord] = {}
    for rec in ledger.runs():
        key = tuple(getattr(rec, k) for k in CELL)
        if key in out:
            raise ClaimgridError(f"{ledger.runs_path}: runs {out[key].run_id} and {rec.run_id} are one cell")
        out[key] = rec
    return out


def differences(a: dict[tuple, RunRecord], b: dict[tuple, RunRecord]) -> list[str]:
    """One line per classification field that differs in a cell of both, and per cell of one only."""
    out = []
    for key in sorted(set(a) | set(b), key=str):
        name = " ".join(f"{k}={v}" for k, v in zip(CELL, key))
        if key not in b:
            out.append(f"only in A: {name}")
            continue
        if key not in a:
            out.append(f"only in B: {name}")
            continue
        ca = a[key].classification.model_dump(mode="json")
        cb = b[key].classification.model_dump(mode="json")
        for field in sorted(set(ca) | set(cb)):
            if ca.get(field) != cb.get(field):
                out.append(f"{name}: {field}: {ca.get(field)!r} (A {a[key].run_id}) != {cb.get(field)!r} (B)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    try:
        a, b = cells(args.a), cells(args.b)
    except ClaimgridError as exc:
        print(f"compare_classifications: {exc}", file=sys.stderr)
        return 2
    diff = differences(a, b)
    for line in diff:
        print(line)
    both = len(set(a) & set(b))
    fields = sum(len(a[k].classification.model_dump()) for k in set(a) & set(b))
    print(
        f"{len(a)} cells in A, {len(b)} in B, {both} in both ({fields} classification fields compared): "
        + (f"{len(diff)} difference(s)" if diff else "identical")
    )
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
