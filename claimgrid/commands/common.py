"""What the verbs that write a grid folder share: the writer lock and repair, the commit,
meta.json read and written as the typed ``GridMeta``, the closing render."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

from pydantic import ValidationError

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.execute.spec import GridMeta
from claimgrid.store import RunStore, StoreIntegrityError
from claimgrid.store.inert import check_folder
from claimgrid.store.seal import SealReport, load_key, verify_seal


def now() -> str:
    """The time stamps of meta.json: UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def read_grid_meta(store: RunStore) -> GridMeta:
    """The folder's meta.json as the typed model; one line naming the file and field if it is not."""
    try:
        return GridMeta.model_validate(store.read_meta())
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(store.meta_path, ".".join(map(str, err.get("loc", ()))) or None, err.get("msg")) from None


def write_meta(store: RunStore, meta: GridMeta) -> None:
    """meta.json, checked against ``GridMeta`` first (a wrong value is a bug, never written)."""
    store.write_meta(GridMeta.model_validate(meta.dump()).dump())


def commit() -> str:
    """This checkout's short commit, ``(dirty)`` with uncommitted changes, or ``unknown``."""
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


def signer(args, folder: Path):
    """The publisher's key for writing ``folder`` (``--key``, else ``$CLAIMGRID_KEY``, else the
    user's config dir; made on first use, never inside ``folder``): :mod:`claimgrid.store.seal`."""
    return load_key(getattr(args, "key", None), ledger=folder)


class UnsealedLedger(ClaimgridError):
    """A ledger without a seal, read without ``--allow-unsealed``: exit 2."""


def _seal_problems(store: RunStore, report: SealReport, allow_unsealed: bool) -> list[str]:
    """The seal's problems; an unsealed ledger is refused (one line) unless ``allow_unsealed``,
    and then its records are checked against meta.json's plan, finished and grid_size."""
    if report.problems or report.sealed:
        return list(report.problems)
    if not allow_unsealed:
        raise UnsealedLedger(
            f"{store.folder}: not sealed (no seal in meta.json): refused, its records and evidence could have been "
            "changed without trace; --allow-unsealed reads it anyway, its lines checked against meta.json's plan"
        )
    return list(report.unsealed_problems)


def verify_ledger(store: RunStore, *, allow_unsealed: bool = False):
    """The folder's shape (:func:`claimgrid.store.inert.check_folder`), every signature and
    manifest, and the set of lines checked; raises naming each file or line that fails (a
    torn last line too: a reader does not read a ledger a writer has not repaired; an
    unsealed ledger unless ``allow_unsealed``, :class:`UnsealedLedger`); prints and returns
    the :class:`~claimgrid.store.seal.SealReport`. Reads only."""
    check_folder(store.folder)
    report = verify_seal(store.folder)
    problems = _seal_problems(store, report, allow_unsealed) + ([report.torn] if report.torn else [])
    problems += store.check_integrity()
    if problems:
        raise StoreIntegrityError(store.folder, problems)
    print(report.line(), flush=True)
    if not report.sealed:
        print(f"{store.folder}: read with --allow-unsealed: its lines agree with meta.json's plan", flush=True)
    return report


def open_for_writing(store: RunStore, *, same_key: bool = False, allow_unsealed: bool = False):
    """Check the folder (its shape, seal and manifests, a ``runs.jsonl`` line that cannot be
    read) before anything is written, then take the folder's writer lock and set a kill's
    leftovers aside (:meth:`~claimgrid.store.folder.RunStore.repair`, said so).

    ``same_key``: the folder must be sealed by ``store.signer`` (a resumed grid's new runs are
    signed by the key that signed the old ones). Returns the seal report."""
    # Nothing is written (the lock included) before the folder is checked: a refused ledger
    # is left as it was. A sealed ledger that lost a line is refused as it is.
    check_folder(store.folder)
    store.probe()  # a folder another writer holds is named first (StoreBusy), read-only
    before = verify_seal(store.folder)
    problems = _seal_problems(store, before, allow_unsealed) + store.check_integrity()
    if problems:
        raise StoreIntegrityError(store.folder, problems)
    mine = store.signer
    if same_key and mine is not None and before.sealed and before.public_key != mine.public_key:
        raise KeyMismatch(
            f"{store.meta_path}: sealed by key {before.fingerprint}, not by yours ({mine.fingerprint}, "
            f"{mine.path}); resume it with the publisher's key (--key FILE)"
        )
    store.acquire("uv run grid.py " + " ".join(sys.argv[1:]))
    try:
        note = store.repair() if store.meta_path.exists() else None
        if note:
            print(f"{store.folder}: repaired: {note}", flush=True)
        report = verify_ledger(store, allow_unsealed=allow_unsealed)
    except BaseException:
        store.release()  # refused: the folder is left as it was, unlocked
        raise
    if mine is not None and report.sealed and report.public_key != mine.public_key:
        if same_key:  # the key changed between the two checks: another writer re-sealed it
            store.release()
            raise KeyMismatch(
                f"{store.meta_path}: sealed by key {report.fingerprint}, not by yours ({mine.fingerprint})"
            )
        print(f"{store.folder}: re-sealed with your key {mine.fingerprint} (it was sealed by {report.fingerprint})")
    return report


class KeyMismatch(ClaimgridError):
    """A resumed folder is sealed by another key than the writer's."""


def finish(store: RunStore) -> int:
    """Render the ledger (LEDGER.md, ledger.html, heatmap), print its end-of-grid summary
    (at most 80 columns, naming LEDGER.md and ledger.html); 0."""
    from claimgrid.ledger import render_ledger

    lines: list[str] = []
    path = render_ledger(store.folder, summary=lines)
    print("\n".join(lines) if lines else f"ledger: {path}")
    return 0
