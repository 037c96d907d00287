"""runs.parquet: the ledger as a dataframe, one flat row per run, beside runs.jsonl.

Contract:

- :func:`columns` ``(records) -> list[Column]``: the columns, in order, derived from the
  typed run record (:class:`claimgrid.store.record.RunRecord`): every scalar field of the
  record and of its nested models is a column named by its dotted path
  (``classification.outcome``, ``faults.reaction``, ``facts.role``, ``parity.timeout_s``);
  a list of strings is a list-of-string column; a free-form object (``runtime_versions``,
  ``parity.guard``, ``classification.evidence.opened``...) is one string column holding its
  canonical (ASCII) JSON, and so is a string column with a value parquet cannot hold (a
  lone surrogate); the file's metadata names those columns. ``timings`` and ``truth`` are spread into one column per key found in the
  records (``timings.wall_s``, ``truth.outcome``). Then the ledger's per-run facts read from
  the evidence folder (the ledger's ``evidence:`` columns, :data:`claimgrid.ledger.columns.COLUMNS`:
  tokens, cost, calls, refusals, runtime errors, retries...) as ``evidence.<name>``, and the
  swap treatment the ledger derives (``treatment``), named as that list names them.
- :func:`frame` ``(ledger, treatments) -> polars.DataFrame`` and :func:`write_frame`
  ``(ledger, treatments, path)``: the rows (run_id order), written with polars to
  ``runs.parquet`` (write-then-rename). Re-rendering unchanged input writes the same bytes.
- :func:`records_from_frame` ``(df) -> list[dict]``: the run records back from the frame,
  exactly as runs.jsonl holds them, ``seal`` included (the round trip a test holds).
  A nested object that is absent reads back absent when every one of its columns is null;
  a key of ``timings`` that one record lacks and another has reads null; a field the
  reference ``truth`` does not state is null in its column and absent from the record.
- :func:`columns_markdown`: the column table of docs/CONTRACTS.md (a generated block).
"""

from __future__ import annotations

import io
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from claimgrid.anybytes import md_cell, md_row
from claimgrid.ledger.columns import Dtype, digest_columns, treatment
from claimgrid.ledger.columns import columns_markdown as ledger_columns_markdown
from claimgrid.ledger.load import Ledger
from claimgrid.store.inert import write_file
from claimgrid.store.record import Classification, RunRecord, dump, parse_record

PARQUET_NAME = "runs.parquet"
# Free-form objects of the record spread into one column per key (the keys a grid writes).
SPREAD = ("timings", "truth")
KEEP_NULL = ("timings",)  # a null timing is recorded as null; the truth leaves out what it does not state
DIGEST_PREFIX = "evidence."
DIGEST_NAMES = {"evidence": "folder_read"}  # the digest's own "was the folder there" flag
JSON_COLUMNS = "claimgrid.json_columns"  # parquet key-value metadata: the columns holding canonical JSON


@dataclass(frozen=True)
class Column:
    name: str  # the dotted path in the record, or evidence.<name> / treatment
    dtype: Dtype
    kind: str  # "scalar" | "list" | "json" | "spread" | "derived"
    path: tuple[str, ...]  # the record path ((): not from the record)
    type_text: str  # what the docs say about its values
    optional_parents: tuple[tuple[str, ...], ...] = ()  # nested objects that may be null


def _unwrap(annotation):
    """``X | None`` -> ``(X, True)``; anything else -> ``(annotation, False)``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _scalar(annotation) -> Dtype | None:
    """The polars dtype of a scalar annotation, else None."""
    if typing.get_origin(annotation) is typing.Literal:
        kinds = {type(a) for a in typing.get_args(annotation)}
        return pl.String if kinds == {str} else None
    scalars: dict[object, Dtype] = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}
    return scalars.get(annotation)


def _is_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _model_columns(model: type[BaseModel], path: tuple[str, ...], parents: tuple) -> list[Column]:
    from claimgrid.store.record import _type_text

    out: list[Column] = []
    for name, info in model.model_fields.items():
        ann, optional = _unwrap(info.annotation)
        here = (*path, name)
        text = _type_text(info.annotation)
        if _is_model(ann):
            out += _model_columns(ann, here, (*parents, here) if optional else parents)
            continue
        dtype = _scalar(ann)
        if dtype is not None:
            out.append(Column(".".join(here), dtype, "scalar", here, text, parents))
        elif typing.get_origin(ann) is list and _scalar(typing.get_args(ann)[0]) is pl.String:
            out.append(Column(".".join(here), pl.List(pl.String), "list", here, text, parents))
        else:
            out.append(Column(".".join(here), pl.String, "json", here, f"canonical JSON of: {text}", parents))
    return out


def _spread(records: list[dict], field: str) -> list[tuple[str, Dtype | None]]:
    """The keys of ``field`` found in ``records`` with the dtype their values share
    (String holding canonical JSON when they share none: kind ``json``)."""
    values: dict[str, list] = {}
    for rec in records:
        for key, value in (rec.get(field) or {}).items():
            values.setdefault(key, []).append(value)
    keys = list(values)
    if field == "truth":  # in the classification's field order, then any other key
        order = list(Classification.model_fields)
        keys.sort(key=lambda k: (order.index(k) if k in order else len(order), k))
    out: list[tuple[str, Dtype | None]] = []
    for key in keys:
        kinds = {type(v) for v in values[key] if v is not None}
        if kinds <= {int, float} and kinds:
            out.append((key, pl.Float64))
        elif kinds == {bool}:
            out.append((key, pl.Boolean))
        elif kinds == {str}:
            out.append((key, pl.String))
        else:
            out.append((key, None))
    return out


def columns(records: list[dict]) -> list[Column]:
    """The frame's columns for these (dumped) records; see the module docstring."""
    out: list[Column] = []
    for col in _model_columns(RunRecord, (), ()):
        field = col.path[0]
        if field not in SPREAD:
            out.append(col)
            continue
        parents = ((field,),) if _unwrap(RunRecord.model_fields[field].annotation)[1] else ()
        for key, dtype in _spread(records, field):
            kind = "spread" if dtype is not None else "json"
            out.append(Column(f"{field}.{key}", dtype or pl.String, kind, (field, key), f"{field}: {key}", parents))
    for c in digest_columns():  # declared once, with the ledger's columns (claimgrid.ledger.columns)
        out.append(Column(_digest_name(c.name), c.dtype, "derived", (), f"evidence digest `{c.name}`"))
    treat = treatment()
    out.append(Column(treat.name, treat.dtype, "derived", (), "the swap treatment the ledger derives"))
    return out


def _digest_name(name: str) -> str:
    """runs.parquet's name of the ledger's digest column ``name``."""
    return DIGEST_PREFIX + DIGEST_NAMES.get(name, name)


def _get(rec, path: tuple[str, ...]):
    for key in path:
        if not isinstance(rec, dict) or key not in rec:
            return None
        rec = rec[key]
    return rec


def _canonical(value) -> str | None:
    # ASCII JSON: a lone surrogate is kept as its \\u escape, not lost or refused.
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def frame(ledger: Ledger, treatments: dict[str, str] | None = None) -> tuple[pl.DataFrame, list[str]]:
    """One row per run of ``ledger`` (run_id order), and the names of its JSON columns."""
    records = [_as_written(rec) for rec in ledger.records.values()]  # typed, read once by the ledger
    cols = columns(records)
    names = {_digest_name(c.name): c.name for c in digest_columns()}
    digest = {row["run_id"]: row for row in ledger.runs.select(["run_id", *names.values()]).to_dicts()}
    treatments = treatments or {}
    data: dict[str, list] = {c.name: [] for c in cols}
    for rec in records:
        d = digest.get(rec["run_id"], {})
        for c in cols:
            if c.kind == "derived":
                value = treatments.get(rec["run_id"]) if c.name == treatment().name else d[names[c.name]]
            elif c.kind == "json":
                value = _canonical(_get(rec, c.path))
            else:
                value = _get(rec, c.path)
                if c.dtype == pl.Float64 and value is not None:
                    value = float(value)
            data[c.name].append(value)
    as_json = [c.name for c in cols if c.kind == "json"]
    for c in cols:
        # Agent-chosen names (paths, tool names) may hold lone surrogates, which a parquet
        # string cannot: such a column is stored as ASCII JSON instead, losslessly.
        if c.kind != "json" and c.dtype in (pl.String, pl.List(pl.String)) and not _utf8(data[c.name]):
            data[c.name] = [_canonical(v) for v in data[c.name]]
            as_json.append(c.name)
    df = pl.DataFrame(
        [pl.Series(c.name, data[c.name], dtype=pl.String if c.name in as_json else c.dtype) for c in cols]
    )
    return df, as_json


def _utf8(values: list) -> bool:
    try:
        for v in values:
            for s in v if isinstance(v, list) else [v]:
                if isinstance(s, str):
                    s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def write_frame(ledger: Ledger, treatments: dict[str, str] | None, path: Path) -> Path:
    """Write :func:`frame` to ``path`` (a temporary name first, then renamed into place); the
    file's key-value metadata ``claimgrid.json_columns`` lists the columns holding JSON."""
    df, json_cols = frame(ledger, treatments)
    buf = io.BytesIO()  # written whole by the store's one writer (never through a planted symlink)
    df.write_parquet(buf, compression="zstd", statistics=True, metadata={JSON_COLUMNS: json.dumps(json_cols)})
    return write_file(path, buf.getvalue())


def read_frame(path: Path) -> tuple[pl.DataFrame, list[str]]:
    """``runs.parquet`` and the names of its JSON columns."""
    meta = pl.read_parquet_metadata(path)
    return pl.read_parquet(path), json.loads(meta.get(JSON_COLUMNS, "[]"))


def records_from_frame(df: pl.DataFrame, json_columns: list[str]) -> list[dict]:
    """The run records the frame was built from (see the module docstring)."""
    declared = [c for c in columns([]) if c.kind != "derived" and c.path[0] not in SPREAD]
    spread = [name for name in df.columns if name.split(".", 1)[0] in SPREAD]
    as_json = set(json_columns)
    out = []
    for row in df.to_dicts():
        rec: dict = {}
        for name in [c.name for c in declared] + spread:
            value = row[name]
            if name in as_json and value is not None:
                value = json.loads(value)
            if name in spread:
                field, key = name.split(".", 1)
                if value is not None or field in KEEP_NULL:  # a truth without a value states none
                    rec.setdefault(field, {})[key] = value
                continue
            _put(rec, next(c.path for c in declared if c.name == name), value)
        for field in SPREAD:
            rec.setdefault(field, {})
        optional = [f for f in SPREAD if _unwrap(RunRecord.model_fields[f].annotation)[1]]
        # Innermost first: a null nested object (facts.final_answer_call) is put back as null
        # before its parent (facts) is tested, and nothing is put into a parent already null.
        parents = {p for c in declared for p in c.optional_parents} | {(f,) for f in optional}
        for parent in sorted(parents, key=len, reverse=True):
            if _all_null(_get(rec, parent)) and isinstance(_get(rec, parent[:-1]) if parent[:-1] else rec, dict):
                _put(rec, parent, None)
        out.append(_as_written(parse_record(rec, "runs.parquet")))
    return out


def _as_written(record: RunRecord) -> dict:
    """The record as runs.jsonl holds it: :func:`~claimgrid.store.record.dump`, and its
    ``seal`` last when the line is sealed (absent from an unsealed ledger's lines)."""
    out = dump(record)
    if record.seal is not None:
        out["seal"] = record.seal
    return out


def _all_null(obj) -> bool:
    if isinstance(obj, dict):
        return all(_all_null(v) for v in obj.values())
    return obj is None


def _put(rec: dict, path: tuple[str, ...], value) -> None:
    for key in path[:-1]:
        rec = rec.setdefault(key, {})
    rec[path[-1]] = value


def _dtype_text(dtype) -> str:
    return {pl.String: "string", pl.Int64: "int64", pl.Float64: "float64", pl.Boolean: "bool"}.get(
        dtype, "list of string" if dtype == pl.List(pl.String) else str(dtype)
    )


def columns_markdown() -> str:
    """The columns of runs.parquet as docs/CONTRACTS.md shows them (generated block ``parquet-columns``)."""
    spread_doc = {
        "timings": "| `timings.<key>` | float64 | one column per key of the record's `timings` (`wall_s`, `agent_s`, ...) |",
        "truth": "| `truth.<field>` | the classification field's | one column per field of the reference truth "
        "(all null: no stated truth) |",
    }
    rows = [md_row(["column", "type", "values"]), "|---|---|---|"]
    cols = columns([])
    for field in RunRecord.model_fields:
        if field in spread_doc:
            rows.append(spread_doc[field])
        rows += [_doc_row(c) for c in cols if c.path and c.path[0] == field]
    rows += [_doc_row(c) for c in cols if not c.path]
    ledger = (
        "The ledger's own per-run columns (claimgrid.ledger.columns: the rows of LEDGER.md's and RUNS.md's "
        "tables, ledger.html's columns, the `evidence.<name>` and `treatment` columns above), each with "
        "where its value comes from:"
    )
    return "\n".join(rows) + "\n\n" + ledger + "\n\n" + ledger_columns_markdown()


def _doc_row(c: Column) -> str:
    return md_row(md_cell(v) for v in (f"`{c.name}`", _dtype_text(c.dtype), c.type_text))
