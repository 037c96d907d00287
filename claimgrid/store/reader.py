"""The one reader of a ledger folder: its ``meta.json``, its run records and each run's events.

:class:`LedgerFolder` is how every module outside the store reads a ledger (the writer is
:class:`claimgrid.store.folder.RunStore`). The rules, written here once:

* **Lines** are read by :mod:`claimgrid.store.lines`' bounded parser and its torn-line rule:
  a torn last line of ``runs.jsonl`` (a kill mid-append) is not a record and not an error
  (:attr:`Runs.torn` says so); any other unreadable line is a :class:`DataError` naming the
  file and the line number.
* **Records** are typed: each line is a :class:`RunRecord` (:func:`parse_record`); a line
  that is JSON but not a record (an unknown field, a wrong value, a ``run_id`` that is no
  folder name) is a :class:`DataError` of one line naming ``<file>:<line>`` and the field.
* **Last wins**: when several lines carry one run id (a run recorded again), the last line
  is that run's record; it keeps the place of the run's first line, and
  :attr:`Runs.repeated` counts the lines it replaced.
* **Versions**: each record line and ``meta.json`` is read at this code's format version:
  an older one is upgraded in memory (never rewritten), a newer one is a :class:`DataError`
  naming the file and ``format_version`` (:mod:`claimgrid.store.upgrade`).
* **Events** of a run are its ``runs/<run id>/events.jsonl``, typed per (source, kind)
  (:mod:`claimgrid.store.events`); every line of it, the last included, must be whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.store.events import EventList, parse_events
from claimgrid.store.lines import EVENTS_NAME, RUNS_NAME, Torn, read_events, read_json_object, read_runs, run_id_problem
from claimgrid.store.record import RunRecord, parse_record
from claimgrid.store.upgrade import upgrade_meta

META_NAME = "meta.json"
RUNS_DIR = "runs"


class RecordError(DataError):
    """A line of ``runs.jsonl`` that is one whole JSON object but not a run record (an unknown
    field, a wrong value, a ``run_id`` that is no folder name): ``<file>:<line>`` and the field."""


@dataclass(frozen=True)
class Runs:
    """What ``runs.jsonl`` holds, read once: one record per run id (the last line of each, at
    the place of its first), the lines a later one replaced, and a torn last line."""

    records: tuple[RunRecord, ...]
    repeated: int = 0
    torn: Torn | None = None


class LedgerFolder:
    """A ledger folder read as typed records: ``meta.json``, ``runs.jsonl``, ``runs/<id>/``.

    Nothing is cached: each call reads the files as they are now."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)

    # ---- paths (the file names live in the store alone)
    @property
    def runs_path(self) -> Path:
        return self.folder / RUNS_NAME

    @property
    def meta_path(self) -> Path:
        return self.folder / META_NAME

    def run_dir(self, run_id: str) -> Path:
        """The evidence folder of ``run_id``; DataError when the id is no folder name."""
        wrong = run_id_problem(run_id)
        if wrong is not None:
            raise DataError(self.folder, None, f"run {run_id!r}: {wrong}")
        return self.folder / RUNS_DIR / run_id

    def events_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / EVENTS_NAME

    def has_runs(self) -> bool:
        """True when the folder holds a ``runs.jsonl`` (a grid was started in it)."""
        return self.runs_path.is_file()

    def has_meta(self) -> bool:
        return self.meta_path.is_file()

    # ---- meta.json
    def meta(self) -> dict:
        """``meta.json``'s object by the bounded parser, at this code's format version (an older
        one upgraded in memory: :mod:`claimgrid.store.upgrade`); DataError naming the file when
        it is not one or is newer than this code reads, FileNotFoundError when it is missing."""
        return upgrade_meta(read_json_object(self.meta_path), self.meta_path)

    # ---- runs.jsonl
    def lines(self) -> list[tuple[int, RunRecord]]:
        """Every record line in file order with its line number, repeats included (a torn
        last line is not one); DataError naming ``<file>:<line>`` for any other line that is
        not JSON, :class:`RecordError` (and the field) for one that is JSON but not a record. An absent ``runs.jsonl`` holds none."""
        return self._lines()[0]

    def read(self) -> Runs:
        """The records of ``runs.jsonl`` under the last-wins rule (module docstring)."""
        lines, torn = self._lines()
        by_id: dict[str, RunRecord] = {}
        for _, record in lines:
            by_id[record.run_id] = record  # a repeated id keeps its first place, takes the last line
        return Runs(tuple(by_id.values()), repeated=len(lines) - len(by_id), torn=torn)

    def runs(self) -> list[RunRecord]:
        """One typed record per run id, the last line of each (:meth:`read`)."""
        return list(self.read().records)

    def _lines(self) -> tuple[list[tuple[int, RunRecord]], Torn | None]:
        found = read_runs(self.runs_path)  # the bounded parser and the torn-line rule
        out = []
        for number, data in found.lines:
            where = f"{self.runs_path}:{number}"
            wrong = run_id_problem(data.get("run_id"))
            if wrong is not None:
                raise RecordError(where, None, wrong)
            try:
                out.append((number, parse_record(data, where)))
            except DataError as exc:
                raise RecordError(exc.path, exc.field, exc.message) from None
        return out, found.torn

    # ---- a run's events
    def event_dicts(self, run_id: str) -> list[dict]:
        """One run's events as recorded (plain objects, in order); DataError naming the line
        for an unreadable one, FileNotFoundError when the run has no ``events.jsonl``."""
        return read_events(self.events_path(run_id))

    def events(self, run_id: str) -> EventList:
        """One run's events, each its (source, kind)'s typed model (:mod:`claimgrid.store.events`)."""
        return parse_events(self.event_dicts(run_id))
