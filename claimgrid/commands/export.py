"""``grid.py export DIR --format inspect|otel``: a ledger as files other tools read."""

from __future__ import annotations

import time
from pathlib import Path

from claimgrid.commands.common import verify_ledger
from claimgrid.commands.options import allow_unsealed_opt
from claimgrid.errors import ClaimgridError
from claimgrid.store import RunStore
from claimgrid.store.inert import check_folder, outside_ledgers


def cmd_export(args) -> int:
    """Write the export into a new folder (default ``DIR.FORMAT`` beside the ledger) and
    print one line per file and the time taken. Bad input is one line, exit 2."""
    folder: Path = args.dir
    if not folder.is_dir() or folder.is_symlink():
        raise ClaimgridError(f"export: {folder} is not a ledger folder")
    if args.otlp_endpoint and args.format != "otel":
        raise ClaimgridError("--otlp-endpoint: only with --format otel")
    # Imported here: claimgrid.ledger loads polars, which ``grid.py``'s other commands do not need.
    from claimgrid.ledger.exports import export_ledger

    # The same integrity check as compare and reclassify, before anything is written: the
    # folder's shape, the seal (every line, in order, each read by the bounded parser) and
    # every run's manifest. A ledger that lost, gained or reordered a line, holds a crafted
    # one, or one edited byte of evidence, is not exported.
    check_folder(folder)
    verify_ledger(RunStore(folder), allow_unsealed=args.allow_unsealed)
    out = outside_ledgers(args.out or folder.with_name(f"{folder.name}.{args.format}"), "--out", folder)
    t0 = time.perf_counter()
    written = export_ledger(folder, out, args.format, endpoint=args.otlp_endpoint)
    for path in written:
        print(path)
    print(f"exported {folder} as {args.format}: {len(written)} file(s) in {out} ({time.perf_counter() - t0:.1f} s)")
    return 0


def add_parser(sub) -> None:
    """``grid.py export DIR --format inspect|otel``."""
    ex = sub.add_parser(
        "export",
        help="write a ledger as files other tools read: Inspect eval logs (inspect view) or OpenTelemetry "
        "GenAI traces (OTLP/JSON)",
    )
    ex.add_argument("dir", type=Path, help="the ledger folder")
    ex.add_argument("--format", required=True, choices=("inspect", "otel"), help="inspect or otel")
    ex.add_argument("--out", type=Path, default=None, help="a new folder for the export (default: DIR.FORMAT)")
    ex.add_argument(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help="with --format otel: also send the spans to this OTLP/HTTP traces URL",
    )
    allow_unsealed_opt(ex)
