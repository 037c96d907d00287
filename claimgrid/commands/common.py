"""What the verbs that write a grid folder share: the writer lock and repair, the commit, the closing render."""

from __future__ import annotations

import subprocess
import sys

from claimgrid import ROOT
from claimgrid.store import RunStore


def _commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        return (sha or "unknown") + (" (dirty)" if dirty else "")
    except OSError:
        return "unknown"


def _open_for_writing(store: RunStore) -> None:
    """Take the folder's writer lock, repair a kill's leftovers (and say so), and refuse
    evidence that fails its manifests or a ``runs.jsonl`` line that cannot be read."""
    store.acquire("uv run grid.py " + " ".join(sys.argv[1:]))
    note = store.repair() if store.meta_path.exists() else None
    if note:
        print(f"{store.folder}: repaired: {note}", flush=True)
    problems = store.check_integrity()
    if problems:
        from claimgrid.store import StoreIntegrityError

        raise StoreIntegrityError(store.folder, problems)


def _finish(store: RunStore) -> int:
    from claimgrid.ledger import headline_table, render_ledger

    path = render_ledger(store.folder)
    try:
        from rich.console import Console

        Console().print(headline_table(store.folder))
    except Exception as exc:  # the table is a convenience; the ledger is written already
        print(f"(headline table unavailable: {exc})")
    print(f"ledger: {path}")
    return 0
