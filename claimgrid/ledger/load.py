"""Reading a ledger folder (``meta.json`` + ``runs.jsonl``) into one flat polars frame.

Contract: :func:`load_ledger` returns a :class:`Ledger` whose ``runs`` frame has one row
per run (the last record wins when a run_id repeats) and only string/int/bool columns:
the grid coordinates, ``swap_condition`` (the record's ``swap``), ``swap_outcome`` (the
classification's ``swap``), every classification key (missing ones read
``"not recorded"``), ``claimed`` (bool), ``role``, ``evidence_dir``, one
``parity.<fact>`` column per parity fact (dicts as canonical JSON), and the per-run facts
read from the run's evidence folder (:data:`DIGEST_SCHEMA`, see :mod:`.evidence`; all
null and ``evidence`` false when the folder is missing).

This module is the ledger's one accessor for run records: every other ledger module
reads runs through the frame it builds, so a change of record shape is handled here.

Bad input raises DataError naming the file, line and field. The lines are read by the
store (:mod:`claimgrid.store.lines`, the one torn-line rule): a torn *last* line (a driver
killed mid-write) is skipped and reported in ``notes``, because an interrupted grid is a
normal state for a ledger; any other unreadable line is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from claimgrid.errors import DataError
from claimgrid.ledger.digest import digest, read_events
from claimgrid.ledger.facts import RenderInputs, render_inputs
from claimgrid.ledger.names import CLAIMED as CLAIMED_VERDICTS
from claimgrid.ledger.names import CLASSIFICATION_KEYS, NOT_RECORDED
from claimgrid.store.lines import RUNS_NAME, read_json_object, read_runs

REQUIRED = ("run_id", "framework", "task", "content", "swap", "model", "classification")


@dataclass
class Ledger:
    folder: Path
    meta: dict
    runs: pl.DataFrame
    parity_facts: list[str]
    extra_classification_keys: list[str]
    notes: list[str] = field(default_factory=list)
    records: dict[str, dict] = field(default_factory=dict)  # run_id -> the stored record
    inputs: RenderInputs = field(default_factory=RenderInputs)  # the task/condition facts (.facts)


# Columns read from each run's evidence folder (see :mod:`.evidence`), with their types.
DIGEST_SCHEMA = {
    "calls": pl.Int64,
    "refused": pl.Int64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "swap_fired_at": pl.Int64,
    "final_writer": pl.String,
    "runtime_models": pl.String,
    "runtime_errors": pl.Int64,
    "retries": pl.Int64,
    "process_wall_s": pl.Float64,
    "runtime_names_substitute": pl.Boolean,
    "transcript_names_substitute": pl.Boolean,
    "transcript_names_assigned": pl.Boolean,
    "gateway_exposes": pl.Boolean,
    "goal_met": pl.Boolean,
    "note_met": pl.Boolean,
    "changed_files": pl.Int64,
    "tool_events": pl.Int64,
    "evidence": pl.Boolean,
}


def load_meta(folder: Path, notes: list[str]) -> dict:
    path = folder / "meta.json"
    if not path.exists():
        notes.append("meta.json is missing: the 'what was run' facts are unknown.")
        return {}
    return read_json_object(path)  # the store's bounded parser: one line naming the file


def read_records(folder: Path, notes: list[str]) -> list[dict]:
    """Every run record in ``runs.jsonl``, validated for the fields the ledger needs."""
    path = folder / RUNS_NAME
    if not path.exists():
        notes.append("runs.jsonl is missing: no run has completed yet.")
        return []
    found = read_runs(path)  # the store's torn-line rule: a bad line other than a torn last one raises
    if found.torn is not None:
        notes.append(
            f"runs.jsonl line {found.torn.number} is truncated (the driver stopped mid-write); it is not counted."
        )
    records = []
    for i, rec in found.lines:
        for key in REQUIRED:
            if key not in rec or rec[key] is None:
                raise DataError(f"{path}:{i}", key, "missing")
        if not isinstance(rec["classification"], dict):
            raise DataError(f"{path}:{i}", "classification", "expected an object")
        if "parity" in rec and rec["parity"] is not None and not isinstance(rec["parity"], dict):
            raise DataError(f"{path}:{i}", "parity", "expected an object")
        records.append(rec)
    return records


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
    if cvo is None:
        return None
    if cvo == "UNKNOWN":
        return None
    return cvo in CLAIMED_VERDICTS


def load_ledger(folder: Path, on_run=None) -> Ledger:
    """Read ``folder``: nothing else (the task and condition facts the grid stored in
    ``meta.json``, see :mod:`.facts`; a ledger older than them says in ``notes`` what it read
    from this checkout instead).

    Each run's evidence folder is read once; ``on_run(record, events, patch, digest)`` is
    called for every run (events None when the folder is missing), in run_id order, so a
    caller can write per-run pages without reading the evidence a second time."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a ledger folder (no such directory)")
    notes: list[str] = []
    meta = load_meta(folder, notes)
    records = read_records(folder, notes)

    by_id: dict[str, dict] = {}
    for rec in records:
        by_id[str(rec["run_id"])] = rec
    dupes = len(records) - len(by_id)
    if dupes:
        notes.append(f"{dupes} run record(s) repeat an earlier run_id; the last record of each is used.")

    facts = sorted({k for rec in by_id.values() for k in (rec.get("parity") or {})})
    known_keys = set(CLASSIFICATION_KEYS) | {"claimed"}
    extra_keys = sorted({k for rec in by_id.values() for k in rec["classification"]} - known_keys)
    inputs = render_inputs(meta, by_id)
    notes += inputs.notes
    role_of, carries_of, checks_of = inputs.roles, inputs.carries, inputs.checks
    rows = []
    for run_id, rec in sorted(by_id.items()):
        c = rec["classification"]
        ev_dir = folder / str(rec.get("evidence_dir") or f"runs/{run_id}")
        events = read_events(ev_dir / "events.jsonl")
        try:
            patch = (ev_dir / "diff.patch").read_text(errors="replace")
        except FileNotFoundError:
            patch = None
        goal_check, note_check = checks_of.get(str(rec["task"]), (None, None))
        facts_rec: dict = rec["facts"] if isinstance(rec.get("facts"), dict) else {}
        d = digest(events, facts_rec, str(rec["model"]), rec.get("substitute"), goal_check, note_check, patch)
        if on_run is not None:
            on_run(rec, events, patch, d)
        row = {
            "run_id": run_id,
            "framework": str(rec["framework"]),
            "task": str(rec["task"]),
            "content": str(rec["content"]),
            "swap_condition": str(rec["swap"]),
            "model": str(rec["model"]),
            "substitute": _label(rec.get("substitute")),
            "repeat": rec.get("repeat") if isinstance(rec.get("repeat"), int) else None,
            "role": _label(rec.get("role") or role_of.get(str(rec["task"]))),
            # What the content condition put in the slot: the record's own fact first.
            "carries": (
                rec["facts"].get("carries")
                if isinstance(rec.get("facts"), dict) and "carries" in rec["facts"]
                else carries_of.get(str(rec["content"]))
            ),
            "evidence_dir": str(rec.get("evidence_dir") or f"runs/{run_id}"),
            "wall_s": _number((rec.get("timings") or {}).get("wall_s")),
        }
        for key in CLASSIFICATION_KEYS:
            name = "swap_outcome" if key == "swap" else key
            value = c.get(key)
            row[name] = (
                value
                if key == "swap_mentioned" and isinstance(value, bool)
                else (None if key == "swap_mentioned" else _label(value))
            )
        row["claimed"] = _claimed(c)
        row.update({k: d.get(k) for k in DIGEST_SCHEMA})
        for key in extra_keys:
            row[f"extra.{key}"] = _fact(c.get(key))
        parity = rec.get("parity") or {}
        for f in facts:
            row[f"parity.{f}"] = _fact(parity.get(f))
        rows.append(row)

    schema = {
        "run_id": pl.String,
        "framework": pl.String,
        "task": pl.String,
        "content": pl.String,
        "swap_condition": pl.String,
        "model": pl.String,
        "substitute": pl.String,
        "repeat": pl.Int64,
        "role": pl.String,
        "carries": pl.String,
        "evidence_dir": pl.String,
        "wall_s": pl.Float64,
        **{
            ("swap_outcome" if k == "swap" else k): (pl.Boolean if k == "swap_mentioned" else pl.String)
            for k in CLASSIFICATION_KEYS
        },
        "claimed": pl.Boolean,
        **DIGEST_SCHEMA,
        **{f"extra.{k}": pl.String for k in extra_keys},
        **{f"parity.{f}": pl.String for f in facts},
    }
    rows = [{k: _text(v) for k, v in row.items()} for row in rows]
    runs = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return Ledger(folder, meta, runs, facts, extra_keys, notes, dict(sorted(by_id.items())), inputs)
