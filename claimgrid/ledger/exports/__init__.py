"""Exports other tools read: a ledger folder as Inspect eval logs or OpenTelemetry traces.

Public face: :data:`FORMATS` (name -> writer, filled by :func:`exporter`, the built-ins
through the same decorator a plugin would use) and :func:`export_ledger`. An export is a
pure function of the ledger folder: it reads ``meta.json``, ``runs.jsonl`` and each run's
evidence files, never imports or runs anything from the folder, and the same folder gives
the same bytes. The output folder is written whole or not at all (a temporary sibling,
renamed into place).

Modules:

* ``_inspect`` - A ledger as Inspect eval logs: one log per (framework, model), one sample per run;
* ``_otel`` - A ledger as OpenTelemetry GenAI traces: OTLP/JSON, one trace per run;
* ``_runs`` - One run of a ledger as the exporters read it: its record, its events and its gateway
  exchanges (request and response as the gateway stored them), with the model calls and tool calls
  in the order the harness observed them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from claimgrid.errors import ClaimgridError, DataError
from claimgrid.store.lines import RUNS_NAME
from claimgrid.store.reader import LedgerFolder

Writer = Callable[..., list[Path]]
FORMATS: dict[str, Writer] = {}


def exporter(name: str) -> Callable[[Writer], Writer]:
    """Register ``writer(folder, out, meta, **options) -> [paths]`` as format ``name``."""

    def register(fn: Writer) -> Writer:
        FORMATS[name] = fn
        return fn

    return register


@exporter("inspect")
def _inspect(folder: Path, out: Path, meta: dict, **_options) -> list[Path]:
    from claimgrid.ledger.exports._inspect import export_inspect

    return export_inspect(folder, out, meta)


@exporter("otel")
def _otel(folder: Path, out: Path, meta: dict, endpoint: str | None = None, **_options) -> list[Path]:
    try:
        from claimgrid.ledger.exports._otel import export_otel
    except ImportError as exc:
        raise ClaimgridError(
            f"export --format otel needs the OpenTelemetry SDK ({exc.name} is missing): uv sync --extra otel"
        ) from exc
    return export_otel(folder, out, meta, endpoint=endpoint)


def export_ledger(folder: Path, out: Path, fmt: str, endpoint: str | None = None) -> list[Path]:
    """Export ``folder`` into the new folder ``out`` as ``fmt``; returns the written files.

    Raises ``ClaimgridError`` (one line, exit 2) for an unknown format or an ``out`` that
    already holds files, ``DataError`` for a folder that is not a readable ledger; ``ClaimgridError`` when the format's optional
    extra is not installed."""
    if fmt not in FORMATS:
        raise ClaimgridError(f"--format: {fmt!r} is not an export format (one of: {', '.join(sorted(FORMATS))})")
    meta_path = folder / "meta.json"
    if not (folder / RUNS_NAME).is_file():
        raise DataError(folder, None, f"not a ledger folder (no {RUNS_NAME})")
    meta = LedgerFolder(folder).meta() if meta_path.is_file() else {}  # the store's bounded parser and upgrades
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise ClaimgridError(f"--out: {out} already exists and is not an empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    # The files are made in a new private folder (mkdtemp: 0700, no name planted in it) and
    # the folder renamed into place; their names are slugs of ledger data (claimgrid.store.inert).
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        written = FORMATS[fmt](folder, tmp, meta if isinstance(meta, dict) else {}, endpoint=endpoint)
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [out / p.relative_to(tmp) for p in written]


__all__ = ["FORMATS", "ClaimgridError", "export_ledger", "exporter"]
