"""``grid.py export DIR --format inspect|otel``: a ledger as files other tools read."""

from __future__ import annotations

import time
from pathlib import Path

from claimgrid.errors import ClaimgridError
from claimgrid.ledger.exports import export_ledger


def cmd_export(args) -> int:
    """Write the export into a new folder (default ``DIR.FORMAT`` beside the ledger) and
    print one line per file and the time taken. Bad input is one line, exit 2."""
    folder: Path = args.dir
    if not folder.is_dir():
        raise ClaimgridError(f"export: {folder} is not a ledger folder")
    if args.otlp_endpoint and args.format != "otel":
        raise ClaimgridError("--otlp-endpoint: only with --format otel")
    from claimgrid.store import StoreIntegrityError
    from claimgrid.store.seal import verify_seal

    # The seal first (every line, in order, each read by the bounded parser): a ledger that
    # lost, gained or reordered a line, or holds a crafted one, is not exported.
    report = verify_seal(folder)
    problems = report.problems + ([report.torn] if report.torn else [])
    if problems:
        raise StoreIntegrityError(folder, problems)
    out = args.out or folder.with_name(f"{folder.name}.{args.format}")
    t0 = time.perf_counter()
    written = export_ledger(folder, out, args.format, endpoint=args.otlp_endpoint)
    for path in written:
        print(path)
    print(f"exported {folder} as {args.format}: {len(written)} file(s) in {out} ({time.perf_counter() - t0:.1f} s)")
    return 0
