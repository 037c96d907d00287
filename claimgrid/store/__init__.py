"""The run store: the one reader and writer of a ledger folder (``meta.json``, ``runs.jsonl``,
``runs/<run id>/``). Write-once run folders, renamed into place before their fsynced line.

Modules:

* ``events`` - Typed evidence events: one model per (source, kind) of docs/CONTRACTS.md, "Evidence
  events";
* ``folder`` - :class:`RunStore` (writer lock, evidence, lines, manifests, repair);
* ``inert`` - how every command writes in or beside a ledger folder (its shape checked, each file
  through a new temporary, slugs for names from ledger data, quarantine, all or nothing);
* ``lines`` - the only reader of ``runs.jsonl`` and ``events.jsonl``, with the one torn-line rule (a
  torn last line of the append-only ``runs.jsonl`` is a kill's, not a record; any other unreadable
  line is an error by line number);
* ``reader`` - :class:`LedgerFolder`, how every other module reads a ledger folder: typed records
  (last wins per run id), a run's typed events, ``meta.json``;
* ``record`` - the typed run record, one line of ``runs.jsonl``;
* ``seal`` - Sealed ledgers: an ed25519 signature over ``meta.json``, every ``runs.jsonl`` line and
  every run's ``manifest.json``, made with the publisher's key (docs/CONTRACTS.md, "Sealed
  ledgers");
* ``upgrade`` - the ledger's ``format_version`` and one upgrade per version: an older record line or
  ``meta.json`` is read at this code's version in memory, a newer one is refused.
"""

from __future__ import annotations

from claimgrid.store.folder import DERIVED_FILES, LOCK_NAME, RunStore, StoreBusy, StoreIntegrityError
from claimgrid.store.lines import EVENTS_NAME, RUNS_NAME
from claimgrid.store.reader import LedgerFolder, RecordError, Runs
from claimgrid.store.record import RunRecord

__all__ = [
    "EVENTS_NAME",
    "RUNS_NAME",
    "DERIVED_FILES",
    "LOCK_NAME",
    "LedgerFolder",
    "RecordError",
    "RunRecord",
    "RunStore",
    "Runs",
    "StoreBusy",
    "StoreIntegrityError",
]
