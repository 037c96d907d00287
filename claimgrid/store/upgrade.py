"""The ledger's format version and the upgrades that read an older ledger.

Every line of ``runs.jsonl`` and ``meta.json`` carries ``format_version`` (an int), written by
the store's writers (:func:`claimgrid.store.record.dump`, :meth:`RunStore.write_meta`).
The readers (:func:`claimgrid.store.record.parse_record`, :meth:`LedgerFolder.meta`,
:meth:`RunStore.read_meta`) pass what they read through :func:`upgrade_record` /
:func:`upgrade_meta` first:

* an object without ``format_version`` is version 1 (every ledger written before the field);
* each version ``n`` below :data:`FORMAT_VERSION` is upgraded by ``UPGRADES[n]``, one step
  at a time, in memory: a file is never rewritten by reading it (a sealed ledger's seal
  covers its bytes as written; a writer that rewrites a line writes the current version);
* a version above :data:`FORMAT_VERSION` (a ledger written by newer code) is refused with
  one line naming the file, the field and the version this code reads (exit 2); so is a
  ``format_version`` that is not a whole number from 1.

The versions (docs/CONTRACTS.md, "Format version"):

1. No ``format_version``. Fields were added to the record and to ``meta.json`` during this
   version's life, so a version-1 object may lack any field that is not required: an absent
   field reads "not recorded" (the model's default, ``None`` for the record's optional
   fields) and is never guessed. Readers that must tell "absent" from "written as null"
   (a record's ``truth``, ``repeat``, ``facts.carries``, ``facts.expected_evidence``) read the
   model's ``model_fields_set``, so the upgrade adds no field but the version.
2. ``format_version`` in every record line and in ``meta.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from claimgrid.errors import DataError

FIELD = "format_version"
FORMAT_VERSION = 2  # what this code writes and reads; an older ledger is upgraded to it


class Upgrade(NamedTuple):
    """One version's step to the next: a record line's and meta.json's (each returns a new dict)."""

    record: Callable[[dict], dict]
    meta: Callable[[dict], dict]


def _record_v1_to_v2(data: dict) -> dict:
    # Version 1's absent fields stay absent: they read "not recorded" (module docstring).
    return {FIELD: 2, **{k: v for k, v in data.items() if k != FIELD}}


def _meta_v1_to_v2(data: dict) -> dict:
    return {FIELD: 2, **{k: v for k, v in data.items() if k != FIELD}}


UPGRADES: dict[int, Upgrade] = {1: Upgrade(record=_record_v1_to_v2, meta=_meta_v1_to_v2)}


def version_of(data: dict, where: str | Path) -> int:
    """The format version of a record line or meta.json object (1 when it has none); a
    DataError naming ``where`` and the field for a version this code cannot read."""
    value = data.get(FIELD, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(where, FIELD, f"{value!r} is not a format version (a whole number from 1)")
    if value > FORMAT_VERSION:
        raise DataError(
            where,
            FIELD,
            f"version {value} is newer than this claimgrid reads (format version {FORMAT_VERSION}); "
            "read it with the claimgrid that wrote it",
        )
    return value


def _upgrade(data: dict, where: str | Path, kind: str) -> dict:
    version = version_of(data, where)
    while version < FORMAT_VERSION:
        data = getattr(UPGRADES[version], kind)(data)
        version += 1
    return data


def upgrade_record(data: dict[str, Any], where: str | Path) -> dict[str, Any]:
    """A ``runs.jsonl`` line's object at :data:`FORMAT_VERSION` (a new dict when upgraded;
    the input is never changed)."""
    return _upgrade(data, where, "record")


def upgrade_meta(data: dict[str, Any], where: str | Path) -> dict[str, Any]:
    """``meta.json``'s object at :data:`FORMAT_VERSION` (a new dict when upgraded)."""
    return _upgrade(data, where, "meta")


def stamp(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``format_version`` set to :data:`FORMAT_VERSION`, first: what a writer
    writes (the object must already be the current version's, e.g. read through the upgrades)."""
    return {FIELD: FORMAT_VERSION, **{k: v for k, v in data.items() if k != FIELD}}
