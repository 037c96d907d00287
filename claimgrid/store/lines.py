"""The one reader of the store's JSON-lines files: ``runs.jsonl`` and each run's ``events.jsonl``.

Every module outside the store reads a ledger folder through
:class:`claimgrid.store.reader.LedgerFolder` (typed records and events), which reads its
lines here; :func:`read_runs`, :func:`scan_runs`, :func:`read_events` and
:func:`scan_events` return each line as a plain ``dict`` (the store's writer and verifier
read them so, and ``grid.py check`` an ``events.jsonl`` given as a file).

The torn-line rule, one for both files: **a line is forgiven only where a kill can leave
it torn.** A line ends with a newline; blank lines are skipped; every other line must be
one JSON object.

* ``runs.jsonl`` is append-only: each run's line (object and newline) is appended in one
  write and fsynced. A kill -9 (or a power loss) during that write can leave the file's
  last bytes, after its last newline, as a fragment: a **torn last line**. It is not a
  record and not an error: readers skip it and say so (:attr:`JsonLines.torn`, with its
  line number and size), and the next writer's :meth:`RunStore.repair` cuts it off, so
  ``--resume`` runs that cell again. Last bytes without a newline that *are* one whole
  JSON object are the record with only its newline lost: read as a record (repair adds
  the newline).
* A **bad line anywhere else** (one that has a newline after it) cannot come from a kill,
  since an append never writes part of a line before a whole one: the file was edited or
  damaged. Readers name it by file and line number (:class:`~claimgrid.errors.DataError`
  from the ``read_`` functions, :attr:`JsonLines.bad` from the ``scan_`` ones); nothing
  drops or repairs it.
* ``events.jsonl`` is never appended to: an evidence folder is written whole under a
  temporary name and renamed into place (:meth:`RunStore.write_evidence`), so a kill
  leaves the old folder or the whole new one, never a torn file. Under the same rule its
  last line gets no pardon: any unreadable line of it, the last included, is damage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from claimgrid import caps
from claimgrid.errors import DataError

RUNS_NAME = "runs.jsonl"
EVENTS_NAME = "events.jsonl"


@dataclass(frozen=True)
class Torn:
    """A torn last line: its line number and how many bytes of it were written."""

    number: int
    size: int


@dataclass
class JsonLines:
    """What one file holds: its JSON objects by line number, its bad lines, a torn tail."""

    path: Path
    lines: list[tuple[int, dict]] = field(default_factory=list)  # (line number, object)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line number, what is wrong)
    torn: Torn | None = None

    @property
    def values(self) -> list[dict]:
        return [value for _, value in self.lines]

    def check(self) -> JsonLines:
        """Self, or DataError ``<path>:<line>: <what is wrong>`` for the first bad line."""
        if self.bad:
            number, why = self.bad[0]
            raise DataError(f"{self.path}:{number}", None, why)
        return self


def _too_deep(value) -> bool:
    """True when ``value`` nests deeper than ``caps.LEDGER_MAX_DEPTH`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > caps.LEDGER_MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def parse_json(data: bytes) -> tuple[object, str]:
    """``(value, "")`` or ``(None, what is wrong)``: the one bounded JSON parse of a ledger's
    files (each line, meta.json). Never raises: over ``caps.LEDGER_LINE_MAX_BYTES``, a NUL
    byte, not UTF-8, not JSON, nested past ``caps.LEDGER_MAX_DEPTH`` are each one reason."""
    if len(data) > caps.LEDGER_LINE_MAX_BYTES:
        return None, f"{len(data)} bytes, over {caps.LEDGER_LINE_MAX_BYTES} (claimgrid caps.LEDGER_LINE_MAX_BYTES)"
    if b"\0" in data:
        return None, "holds a NUL byte"
    try:
        value = json.loads(data)
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg})"
    except RecursionError:
        return None, f"nested deeper than {caps.LEDGER_MAX_DEPTH} (claimgrid caps.LEDGER_MAX_DEPTH)"
    except ValueError:
        return None, "not valid JSON"
    if _too_deep(value):
        return None, f"nested deeper than {caps.LEDGER_MAX_DEPTH} (claimgrid caps.LEDGER_MAX_DEPTH)"
    return value, ""


def run_id_problem(run_id) -> str | None:
    """Why ``run_id`` cannot be a run's id (its folder's name), or None when it can: a
    non-empty string of at most ``caps.RUN_ID_MAX_BYTES`` bytes, no ``/``, no NUL, no
    control character, not starting with ``.``."""
    if not isinstance(run_id, str) or not run_id:
        return "field 'run_id': not a non-empty string"
    if len(run_id.encode("utf-8", "surrogatepass")) > caps.RUN_ID_MAX_BYTES:
        return f"field 'run_id': over {caps.RUN_ID_MAX_BYTES} bytes (claimgrid caps.RUN_ID_MAX_BYTES)"
    if "/" in run_id or run_id.startswith(".") or any(ord(c) < 32 or c == "\x7f" for c in run_id):
        return "field 'run_id': not a folder name (a '/', a leading '.' or a control character)"
    return None


def read_json_object(path: Path) -> dict:
    """A ledger's JSON file (meta.json) read by :func:`parse_json`: its object, or DataError
    naming the file (FileNotFoundError when it is missing)."""
    value, why = parse_json(_read(path))
    if not isinstance(value, dict):
        raise DataError(path, None, why or "expected a JSON object")
    return value


def _object(line: bytes) -> tuple[dict | None, str]:
    value, why = parse_json(line)
    if why:
        return None, why
    if not isinstance(value, dict):
        return None, "expected a JSON object"
    return value, ""


def _scan(path: Path, data: bytes, append_only: bool) -> JsonLines:
    out = JsonLines(Path(path))
    chunks = data.split(b"\n")
    tail = chunks.pop()  # the bytes after the last newline (b"" when the file ends with one)
    for number, line in enumerate(chunks, 1):
        if not line.strip():
            continue
        value, why = _object(line)
        if value is None:
            out.bad.append((number, why))
        else:
            out.lines.append((number, value))
    if tail.strip():
        number = len(chunks) + 1
        value, why = _object(tail)
        if value is not None:
            out.lines.append((number, value))  # a whole object: only its newline was lost
        elif append_only:
            out.torn = Torn(number, len(tail))
        else:
            out.bad.append((number, why))
    return out


def scan_bytes(path: Path, data: bytes, append_only: bool) -> JsonLines:
    """The lines of ``data`` (read from ``path``, which names them) by the one bounded parser;
    ``append_only``: a torn last line is :attr:`JsonLines.torn`, else a bad line."""
    return _scan(path, data, append_only)


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DataError(path, None, f"cannot be read ({exc.strerror or exc})") from None


def scan_runs(path: Path) -> JsonLines:
    """Every line of a ``runs.jsonl`` (absent: none), bad ones listed, never raised."""
    try:
        data = _read(path)
    except FileNotFoundError:
        return JsonLines(Path(path))
    return _scan(path, data, append_only=True)


def read_runs(path: Path) -> JsonLines:
    """:func:`scan_runs`, raising DataError for a bad line (a torn last one is :attr:`~JsonLines.torn`)."""
    return scan_runs(path).check()


def scan_events(path: Path) -> JsonLines:
    """Every line of one ``events.jsonl``; FileNotFoundError when it is missing."""
    return _scan(path, _read(path), append_only=False)


def read_events(path: Path) -> list[dict]:
    """The events of one ``events.jsonl`` in order, as plain dicts; DataError naming the
    line for any unreadable line; FileNotFoundError when it is missing."""
    return scan_events(path).check().values
