"""The ledger's per-run columns, declared once.

Contract: :data:`COLUMNS` is the one list of the columns every ledger page reads per run,
in order: its name, its polars type, where its value comes from and what it means.
:func:`claimgrid.ledger.load.load_ledger` builds the run rows (and the polars frame) from
it and nothing else; ``runs.parquet`` (:mod:`.frame`) takes its ``evidence.<name>`` and
``treatment`` columns from it; ledger.html's columns are the ones marked for the viewer
(:func:`viewer_columns`); calibration finds a classification field's column by its source
(:func:`by_source`); docs/CONTRACTS.md's column table is :func:`columns_markdown`
(a generated block a test keeps current). Renaming a column here renames it in all of
them; a page that still reads the old name fails with ``KeyError`` naming it, never a
silent ``None``.

A column's ``source`` is one of:

* ``record:<dotted path>``: that field of the typed run record
  (:class:`claimgrid.store.record.RunRecord`), ``classification.outcome`` etc.;
* ``evidence:<key>``: the run's evidence digest (:func:`claimgrid.ledger.digest.digest`);
* ``ledger:<what>``: derived by the ledger from the record and the grid's stored facts
  (:mod:`claimgrid.ledger.load` says how; ``treatment`` by :class:`~claimgrid.ledger.report.Report`).

Besides these, a ledger has one ``extra.<field>`` column per other classification field
its records carry and one ``parity.<fact>`` column per parity fact (strings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import polars as pl

from claimgrid.anybytes import md_cell, md_row
from claimgrid.ledger.names import CLASSIFICATION_KEYS

# A column's polars type: a class (pl.String) or an instance (pl.List(pl.String)).
Dtype: TypeAlias = "pl.DataType | type[pl.DataType]"

COORDINATE, FIELD = "coordinate", "field"  # the viewer's roles: run-table coordinates, classification filters


@dataclass(frozen=True)
class LedgerColumn:
    name: str  # the column's name in the run rows, the frame, the viewer and runs.parquet
    dtype: Dtype
    source: str  # record:<path> | evidence:<key> | ledger:<what> (module docstring)
    explanation: str
    viewer: str | None = None  # COORDINATE or FIELD: a column of ledger.html; None: not shown there

    @property
    def origin(self) -> str:
        return self.source.split(":", 1)[0]

    @property
    def path(self) -> tuple[str, ...]:
        """The record path (``record:`` columns), or the digest key (``evidence:``)."""
        return tuple(self.source.split(":", 1)[1].split("."))


_CLASSIFICATION_TEXT = {
    "claim_verdict": "the claim check: does the agent's account match the evidence",
    "claim_form": "the form the claim took (trace status, free text)",
    "outcome": "the verifier's outcome of the workspace",
    "claim_vs_outcome": "claimed success crossed with the verifier's outcome",
    "injection": "what the run did with an injected attacker goal",
    "legitimate": "what the run did with a legitimate owner's note",
    "declarations": "whether the declared ids and agent name were echoed",
    "channels": "whether tool events and model requests agree",
    "swap": "what the swap did to the run",
    "swap_mentioned": "whether the agent's report mentions the swap",
    "process": "how the framework's process ended",
    "review": "a reviewer task's verdict against the truth",
}


def _classification(key: str) -> LedgerColumn:
    name = "swap_outcome" if key == "swap" else key  # the record's `swap` is the swap condition
    dtype = pl.Boolean if key == "swap_mentioned" else pl.String
    text = _CLASSIFICATION_TEXT.get(key, "a classification field") + (
        "" if key == "swap_mentioned" else " (`not recorded` when the record has none)"
    )
    return LedgerColumn(name, dtype, f"record:classification.{key}", text, None if key == "swap_mentioned" else FIELD)


_DIGEST = (
    ("calls", pl.Int64, "model calls the gateway answered or refused"),
    ("refused", pl.Int64, "model calls the gateway refused"),
    ("prompt_tokens", pl.Int64, "prompt tokens over the run's calls (null: a call reported no usage)"),
    ("completion_tokens", pl.Int64, "completion tokens over the run's calls (null: a call reported no usage)"),
    ("cost_usd", pl.Float64, "LiteLLM's price of the run's calls (null: a price unknown, never 0)"),
    ("swap_fired_at", pl.Int64, "the first call the gateway swapped or refused (null: none)"),
    ("final_writer", pl.String, "the model that served the last answered call"),
    ("runtime_models", pl.String, "the model names the framework's runtime read, comma-separated"),
    ("runtime_errors", pl.Int64, "error events of the framework's runtime"),
    ("retries", pl.Int64, "gateway requests that followed a refused one"),
    ("process_wall_s", pl.Float64, "the framework process's wall time, seconds"),
    ("runtime_names_substitute", pl.Boolean, "the runtime named the substitute model"),
    ("transcript_names_substitute", pl.Boolean, "the framework's own transcript named the substitute"),
    ("transcript_names_assigned", pl.Boolean, "the framework's own transcript named the assigned model"),
    ("gateway_exposes", pl.Boolean, "the gateway served a model other than the assigned one"),
    ("goal_met", pl.Boolean, "the task's attacker-goal check holds in the evidence"),
    ("note_met", pl.Boolean, "the task's owner's-note check holds in the evidence"),
    ("changed_files", pl.Int64, "files in the verifier's diff (null: no diff event)"),
    ("tool_events", pl.Int64, "tool calls executed by the harness (or, own tools, made at the gateway)"),
    ("judge_model", pl.String, "the claim judge asked to read the report (`--claim-judge`; null: none)"),
    (
        "judge_stance",
        pl.String,
        "the claim judge's reading: yes, no, partial, unclear, `no reading` (null: no judge); never the classification",
    ),
    ("evidence", pl.Boolean, "the run's evidence folder was there to read"),
)

COLUMNS: tuple[LedgerColumn, ...] = (
    LedgerColumn("run_id", pl.String, "record:run_id", "the run's id (its evidence folder's name)"),
    LedgerColumn("framework", pl.String, "record:framework", "the agent framework", COORDINATE),
    LedgerColumn("task", pl.String, "record:task", "the task", COORDINATE),
    LedgerColumn("content", pl.String, "record:content", "the content condition", COORDINATE),
    LedgerColumn("swap_condition", pl.String, "record:swap", "the swap condition", COORDINATE),
    LedgerColumn("model", pl.String, "record:model", "the assigned model", COORDINATE),
    LedgerColumn("substitute", pl.String, "record:substitute", "the swap's substitute model (`not recorded`: none)"),
    LedgerColumn("repeat", pl.Int64, "record:repeat", "the repeat index", COORDINATE),
    LedgerColumn("role", pl.String, "ledger:role", "the task's role: the record's, else the grid's task facts"),
    LedgerColumn(
        "carries",
        pl.String,
        "ledger:carries",
        "what the content condition put in the slot: the record's, else the grid's",
    ),
    LedgerColumn("evidence_dir", pl.String, "ledger:evidence_dir", "the evidence folder (default `runs/<run id>`)"),
    LedgerColumn("wall_s", pl.Float64, "record:timings.wall_s", "the run's wall time, seconds"),
    *(_classification(k) for k in CLASSIFICATION_KEYS),
    LedgerColumn(
        "claimed",
        pl.Boolean,
        "ledger:claimed",
        "did the run claim success (the classifier's, else from claim vs outcome)",
        FIELD,
    ),
    *(LedgerColumn(name, dtype, f"evidence:{name}", text) for name, dtype, text in _DIGEST),
    LedgerColumn("treatment", pl.String, "ledger:treatment", "the swap treatment the run received (gateway log)"),
)

TREATMENT = "ledger:treatment"  # derived after loading (by the report): not a column of the loaded frame


def column(name: str) -> LedgerColumn:
    """The column named ``name``; KeyError naming it when no column has that name."""
    for c in COLUMNS:
        if c.name == name:
            return c
    raise KeyError(f"no ledger column named {name!r} (claimgrid.ledger.columns.COLUMNS)")


def by_source(source: str) -> LedgerColumn | None:
    """The column whose value is ``source`` (``record:classification.outcome``), else None."""
    return next((c for c in COLUMNS if c.source == source), None)


def classification_column(field: str) -> str:
    """The name of the column holding the classification field ``field``: the column read
    from it (or derived as it: ``claimed``), else the ledger's ``extra.<field>``."""
    found = by_source(f"record:classification.{field}") or by_source(f"ledger:{field}")
    return found.name if found is not None else f"extra.{field}"


def loaded() -> list[LedgerColumn]:
    """The columns of the loaded frame (:func:`claimgrid.ledger.load.load_ledger`), in order."""
    return [c for c in COLUMNS if c.source != TREATMENT]


def treatment() -> LedgerColumn:
    """The swap treatment's column (the report derives it from the gateway log)."""
    found = by_source(TREATMENT)
    if found is None:
        raise KeyError(f"no ledger column has source {TREATMENT!r} (claimgrid.ledger.columns.COLUMNS)")
    return found


def digest_columns() -> list[LedgerColumn]:
    return [c for c in COLUMNS if c.origin == "evidence"]


def viewer_columns(role: str) -> list[str]:
    """The names of the viewer's columns of ``role`` (COORDINATE or FIELD), in order."""
    return [c.name for c in COLUMNS if c.viewer == role]


def numeric_columns() -> list[str]:
    """The names of the integer columns (the viewer sorts them as numbers)."""
    return [c.name for c in COLUMNS if c.dtype == pl.Int64]


def _dtype_text(dtype) -> str:
    return {pl.String: "string", pl.Int64: "int64", pl.Float64: "float64", pl.Boolean: "bool"}.get(dtype, str(dtype))


def columns_markdown() -> str:
    """The ledger's per-run columns as docs/CONTRACTS.md shows them (in the generated
    ``parquet-columns`` block, after runs.parquet's own)."""
    rows = [md_row(["column", "type", "from", "meaning"]), "|---|---|---|---|"]
    rows += [
        md_row(md_cell(v) for v in (f"`{c.name}`", _dtype_text(c.dtype), f"`{c.source}`", c.explanation))
        for c in COLUMNS
    ]
    rows += [
        "| `extra.<field>` | string | `record:classification.<field>` | any other classification field the "
        "records carry (canonical JSON of objects) |",
        "| `parity.<fact>` | string | `record:parity.<fact>` | one per parity fact (canonical JSON of objects) |",
    ]
    return "\n".join(rows)
