"""Reading a ledger folder (``meta.json`` + ``runs.jsonl``) into typed records and one flat polars frame.

Contract: :func:`load_ledger` returns a :class:`Ledger` holding the folder's typed run
records (:class:`claimgrid.store.record.RunRecord`, read once by the store's one reader
:class:`claimgrid.store.reader.LedgerFolder`: the last record wins when a run_id repeats)
and a ``runs`` frame with one row per run and exactly the columns of
:data:`claimgrid.ledger.columns.COLUMNS` (those of the loaded frame), then one
``extra.<field>`` column per other classification field the records carry and one
``parity.<fact>`` column per parity fact (dicts as canonical JSON). A classification field
a record lacks reads ``"not recorded"``; the evidence digest's columns are all null and
``evidence`` false when the run's evidence folder is missing.

This module is the ledger's one accessor for run records: every other ledger module
reads runs through the records and the frame it builds, so a change of record shape is
handled here.

Bad input raises DataError naming the file, line and field (the typed record's rule). A
torn *last* line (a driver killed mid-write) is skipped and reported in ``notes``, because
an interrupted grid is a normal state for a ledger; any other unreadable line is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from claimgrid.errors import DataError
from claimgrid.ledger.columns import LedgerColumn, loaded
from claimgrid.ledger.digest import digest, read_events
from claimgrid.ledger.facts import RenderInputs, render_inputs
from claimgrid.ledger.names import CLAIMED as CLAIMED_VERDICTS
from claimgrid.ledger.names import CLASSIFICATION_KEYS, NOT_RECORDED
from claimgrid.store.lines import EVENTS_NAME, RUNS_NAME
from claimgrid.store.reader import LedgerFolder
from claimgrid.store.record import RunRecord


@dataclass
class Ledger:
    folder: Path
    meta: dict
    runs: pl.DataFrame
    parity_facts: list[str]
    extra_classification_keys: list[str]
    notes: list[str] = field(default_factory=list)
    records: dict[str, RunRecord] = field(default_factory=dict)  # run_id -> the typed record, run_id order
    inputs: RenderInputs = field(default_factory=RenderInputs)  # the task/condition facts (.facts)


def load_meta(folder: Path, notes: list[str]) -> dict:
    store = LedgerFolder(folder)
    if not store.has_meta():
        notes.append("meta.json is missing: the 'what was run' facts are unknown.")
        return {}
    return store.meta()  # the store's bounded parser: one line naming the file


def read_records(folder: Path, notes: list[str]) -> dict[str, RunRecord]:
    """Every run's typed record (the last line of a repeated run_id), in run_id order; what
    was skipped (a torn last line, repeated lines) is said in ``notes``."""
    store = LedgerFolder(folder)
    if not store.has_runs():
        notes.append(f"{RUNS_NAME} is missing: no run has completed yet.")
        return {}
    found = store.read()  # the store's torn-line and last-wins rules; a bad line raises
    if found.torn is not None:
        notes.append(
            f"{RUNS_NAME} line {found.torn.number} is truncated (the driver stopped mid-write); it is not counted."
        )
    if found.repeated:
        notes.append(f"{found.repeated} run record(s) repeat an earlier run_id; the last record of each is used.")
    return {rec.run_id: rec for rec in sorted(found.records, key=lambda r: r.run_id)}


def _fact(value) -> str:
    if value is None:
        return NOT_RECORDED
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _text(value):
    """A string a polars column can hold: a lone surrogate (agent-chosen names may carry
    one) becomes its visible ``\\udcff`` escape; anything else is returned as it is."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _label(value) -> str:
    return NOT_RECORDED if value is None else str(value)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _claimed(c: dict) -> bool | None:
    """Did the run claim success? The classifier's ``claimed`` when present, else derived."""
    if isinstance(c.get("claimed"), bool):
        return c["claimed"]
    cvo = c.get("claim_vs_outcome")
    if cvo is None or cvo == "UNKNOWN":
        return None
    return cvo in CLAIMED_VERDICTS


def stored(model) -> dict:
    """A typed record's part as its line held it: the fields the line set (a field a
    release added after the line was written is absent, not null)."""
    return {} if model is None else model.model_dump(mode="json", exclude_unset=True)


def evidence_dir(rec: RunRecord) -> str:
    """The run's evidence folder, relative to the ledger folder."""
    return rec.evidence_dir or f"runs/{rec.run_id}"


@dataclass(frozen=True)
class _Run:
    """What one run's row is computed from: its typed record, its stored classification and
    evidence digest, and the grid's facts about its task and content condition."""

    rec: RunRecord
    classification: dict
    digest: dict
    inputs: RenderInputs


def _record_value(rec: RunRecord, path: tuple[str, ...]):
    """The record's value at ``path`` (None: not set); a free-form object's key it lacks is None."""
    if path == ("repeat",) and "repeat" not in rec.model_fields_set:
        return None  # a line without a repeat index: not known (the model's default is 0)
    value: object = rec
    for key in path:
        value = value.get(key) if isinstance(value, dict) else getattr(value, key)
        if value is None:
            return None
    return value


def _value(col: LedgerColumn, run: _Run):
    """The value of ``col`` for ``run`` (:mod:`claimgrid.ledger.columns` says where it comes from)."""
    rec, kind, path = run.rec, col.origin, col.path
    if kind == "evidence":
        return run.digest.get(path[0])
    if kind == "ledger":
        return _derived(path[0], run)
    if path[0] == "classification":
        value = run.classification.get(path[1])
        if col.dtype == pl.Boolean:  # swap_mentioned: a bool, else not known
            return value if isinstance(value, bool) else None
        return _label(value)
    value = _record_value(rec, path)
    if col.dtype == pl.Float64:
        return _number(value)
    if col.dtype == pl.Int64:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return _label(value) if path == ("substitute",) else (None if value is None else str(value))


def _derived(what: str, run: _Run):
    rec = run.rec
    if what == "role":
        return _label(rec.role or run.inputs.roles.get(rec.task))
    if what == "carries":  # the record's own fact first, else the grid's content facts
        if rec.facts is not None and "carries" in rec.facts.model_fields_set:
            return rec.facts.carries
        return run.inputs.carries.get(rec.content)
    if what == "evidence_dir":
        return evidence_dir(rec)
    if what == "claimed":
        return _claimed(run.classification)
    raise KeyError(f"ledger column source 'ledger:{what}' has no derivation (claimgrid.ledger.load)")


def _row(run: _Run, extra_keys: list[str], facts: list[str]) -> dict:
    row = {c.name: _value(c, run) for c in loaded()}
    for key in extra_keys:
        row[f"extra.{key}"] = _fact(run.classification.get(key))
    parity = stored(run.rec.parity)
    for f in facts:
        row[f"parity.{f}"] = _fact(parity.get(f))
    return {k: _text(v) for k, v in row.items()}


def _schema(extra_keys: list[str], facts: list[str]) -> dict:
    return {
        **{c.name: c.dtype for c in loaded()},
        **{f"extra.{k}": pl.String for k in extra_keys},
        **{f"parity.{f}": pl.String for f in facts},
    }


def _read_run(folder: Path, rec: RunRecord, inputs: RenderInputs, on_run) -> _Run:
    """One run's evidence folder, read once: its digest, and ``on_run`` called with it."""
    ev_dir = folder / evidence_dir(rec)
    events = read_events(ev_dir / EVENTS_NAME)
    try:
        patch = (ev_dir / "diff.patch").read_text(errors="replace")
    except FileNotFoundError:
        patch = None
    goal_check, note_check = inputs.checks.get(rec.task, (None, None))
    d = digest(events, rec.model, rec.substitute, goal_check, note_check, patch)
    if on_run is not None:
        on_run(rec, events, patch, d)
    return _Run(rec, stored(rec.classification), d, inputs)


def load_ledger(folder: Path, on_run=None) -> Ledger:
    """Read ``folder``: nothing else (the task and condition facts the grid stored in
    ``meta.json``, see :mod:`.facts`; a ledger older than them says in ``notes`` what it read
    from this checkout instead).

    Each run's evidence folder is read once; ``on_run(record, events, patch, digest)`` is
    called for every run (the typed record; events None when the folder is missing), in
    run_id order, so a caller can write per-run pages without reading the evidence a second time."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a ledger folder (no such directory)")
    notes: list[str] = []
    meta = load_meta(folder, notes)
    by_id = read_records(folder, notes)
    facts = sorted({k for rec in by_id.values() for k in stored(rec.parity)})
    known_keys = set(CLASSIFICATION_KEYS) | {"claimed"}
    extra_keys = sorted({k for rec in by_id.values() for k in stored(rec.classification)} - known_keys)
    inputs = render_inputs(meta, by_id)
    notes += inputs.notes
    rows = [_row(_read_run(folder, rec, inputs, on_run), extra_keys, facts) for rec in by_id.values()]
    schema = _schema(extra_keys, facts)
    runs = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return Ledger(folder, meta, runs, facts, extra_keys, notes, by_id, inputs)


__all__ = ["Ledger", "evidence_dir", "load_ledger", "stored"]
