"""``grid.py report DIR``: render a ledger folder's LEDGER.md, RUNS.md, ledger.html, heatmap.svg,
runs.parquet and every RUN.md again from the folder alone, and print the end-of-grid summary.

The folder's seals and manifests are verified first (:func:`claimgrid.commands.common.verify_ledger`;
a failure is bad input, named by file or line, and nothing is written). Nothing is classified
again (that is ``reclassify``) and nothing in the folder is executed: the records, the evidence
and ``meta.json`` are all it reads, so a published folder renders the same on any machine,
with or without this checkout's ``tasks/`` and ``conditions/`` (:mod:`claimgrid.ledger.facts`).
Only derived files are written; they are never sealed (docs/CONTRACTS.md).
"""

from __future__ import annotations

from pathlib import Path

from claimgrid.commands.options import allow_unsealed_opt
from claimgrid.commands.validate import UsageError
from claimgrid.store import RUNS_NAME, LedgerFolder
from claimgrid.store.inert import check_folder


def cmd_report(args) -> int:
    """Verify, render, print the summary; 0 when rendered (bad input raises, exit 2)."""
    from claimgrid.commands.common import verify_ledger  # polars and the renderer: only when used
    from claimgrid.ledger import render_ledger
    from claimgrid.store import RunStore

    folder = args.dir
    check_folder(folder)
    if not folder.is_dir() or not LedgerFolder(folder).has_runs():
        raise UsageError(f"report {folder}: not a grid folder (no {RUNS_NAME})")
    verify_ledger(RunStore(folder), allow_unsealed=args.allow_unsealed)
    summary: list[str] = []
    render_ledger(folder, summary)
    print("\n".join(summary))
    return 0


def add_parser(sub) -> None:
    rp = sub.add_parser(
        "report", help="render a ledger folder's LEDGER.md, RUNS.md and ledger.html again from the folder"
    )
    rp.add_argument("dir", type=Path, help="the ledger folder")
    allow_unsealed_opt(rp)
