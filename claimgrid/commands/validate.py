"""One validation layer for what a user hands ``grid.py``: flags, data files and the store.

Everything here runs **before anything is written** under ``--out`` (or a resumed
folder). Each problem is one ``ClaimgridError`` line naming the flag, or the file and
field, and saying what is allowed; ``cli.main`` prints it and exits 2.

* argparse ``type=`` functions (``whole``, ``seconds``, ``names``, ``text``) check a flag's
  type and range as it is parsed, so argparse reports ``argument --jobs: ...``;
* ``check_out``, ``check_dir`` check paths given on the command line;
* ``check_grid_size`` bounds the product of the selection before any cell is planned;
* ``read_meta`` / ``check_resume`` / ``check_reclassify`` check a stored grid folder
  (``check_resume`` compares the grid spec the flags ask for with the stored one).

The allowed ranges (below and in claimgrid.execute.spec) reach the flags' help texts (cli.build_parser), from which README's
flag table is generated (``uv run python -m claimgrid.commands.docs``).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claimgrid.caps import (  # noqa: F401  (the limits' bounds and defaults, named here for the flags)
    MAX_CALL_TIMEOUT_S,
    MAX_OUTPUT_TOKENS,
    MAX_RUN_TOKENS,
    REAL_CALL_TIMEOUT_S,
    REAL_MAX_MODEL_CALLS,
    REAL_MAX_OUTPUT_TOKENS,
    REAL_MAX_RUN_TOKENS,
    REAL_TIMEOUT_S,
    REFERENCE_CALL_TIMEOUT_S,
)
from claimgrid.commands import flags
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.execute.spec import (  # noqa: F401  (the grid spec's bounds and defaults, named here too)
    DEFAULT_ISOLATION,
    DEFAULT_MAX_MODEL_CALLS,
    DEFAULT_REPEATS,
    DEFAULT_TIMEOUT_S,
    MAX_MODEL_CALLS,
    MAX_REPEATS,
    MAX_TIMEOUT_S,
    GridSpec,
    Selection,
)
from claimgrid.inputs.schema import validate
from claimgrid.reference import registry as reference_registry
from claimgrid.store import RUNS_NAME, LedgerFolder, RecordError, RunRecord, RunStore, StoreIntegrityError
from claimgrid.store.lines import parse_json
from claimgrid.store.seal import verify_seal
from claimgrid.store.upgrade import upgrade_meta

MAX_JOBS = 256
MAX_INFLIGHT = 4096
MAX_GRID = 100_000  # runs (cells x repeats); the default matrix is far below it


class UsageError(ClaimgridError):
    """A flag's value is not allowed (exit 2)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (no usage block), exit 2; subparsers inherit it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


# ---------------------------------------------------------------- argparse types


def connections(text: str) -> str:
    """An argparse type for one ``--max-connections`` value: ``N`` or ``PROVIDER=N``."""
    from claimgrid.gateway.connections import parse_limits

    try:
        parse_limits([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    return text.strip()


def whole(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number; allowed: {lo} to {hi}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: {lo} to {hi}")
        return value

    parse.__name__ = "whole number"
    return parse


def seconds(hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds, more than 0 and at most ``hi``."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not a number of seconds; allowed: more than 0, at most {hi:g}"
            ) from None
        if not math.isfinite(value) or not 0 < value <= hi:
            raise argparse.ArgumentTypeError(f"{text} is not allowed; allowed: more than 0, at most {hi:g} seconds")
        return value

    parse.__name__ = "seconds"
    return parse


def names(text: str) -> list[str]:
    """An argparse type: comma-separated names, none empty, none repeated.

    A repeated name would plan two cells with one run id; an empty list is not "all".
    """
    items = [v.strip() for v in text.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError(
            f"'{text}' names nothing; give comma-separated names (leave the flag out for all)"
        )
    if not all(items):
        raise argparse.ArgumentTypeError(
            f"'{text}' has an empty name; give comma-separated names without empty entries"
        )
    seen = set()
    for item in items:
        if item in seen:
            raise argparse.ArgumentTypeError(f"'{item}' is given twice in '{text}'; each name at most once")
        seen.add(item)
    return items


names.__name__ = "names"


def text(value: str) -> str:
    """An argparse type: a non-empty string."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty value is not allowed")
    return value.strip()


text.__name__ = "text"


def server_url(value: str) -> str:
    """An argparse type for ``--model-server``: an http(s) URL with a host (``/v1`` or not)."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(value.strip())
        port_ok = u.port is None or u.port > 0
    except ValueError:
        u, port_ok = None, False
    if u is None or u.scheme not in ("http", "https") or not u.hostname or not port_ok or u.query or u.fragment:
        raise argparse.ArgumentTypeError(
            f"'{value}': an http:// or https:// URL of the server, e.g. http://127.0.0.1:8080 (its /v1 or not)"
        )
    return value.strip().rstrip("/")


server_url.__name__ = "URL"


# ---------------------------------------------------------------- paths


def check_dir(flag: str, path: Path) -> None:
    """A flag naming an existing folder to read."""
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such folder")
    if not path.is_dir():
        raise UsageError(f"{flag} {path}: not a folder")


def check_file(flag: str, path: Path) -> None:
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file")
    if not path.is_file():
        raise UsageError(f"{flag} {path}: not a file")


def check_out(path: Path, flag: str = "--out") -> None:
    """``--out`` must be a new folder in a writable place: the grid never mixes into existing files."""
    if path.exists() or path.is_symlink():
        kind = "folder" if path.is_dir() else "file"
        raise UsageError(
            f"{flag} {path}: a {kind} of that name exists; give a new folder "
            "(or --resume DIR to finish an interrupted grid)"
        )
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a folder")
    # Probe by making (and removing) an empty folder beside where --out will be: access()
    # says yes to root on /proc or a full disk; only a real mkdir tells.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".claimgrid-probe-", dir=parent))
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot create folders in {parent} ({exc.strerror}); give a folder in a writable place"
        ) from None


def check_data_flags(args) -> None:
    """The data folders and files named on the command line exist (before anything loads them)."""
    for flag, dest in (("--tasks-dir", "tasks_dir"), ("--conditions-dir", "conditions_dir")):
        if getattr(args, dest, None) is not None:
            check_dir(flag, getattr(args, dest))
    if getattr(args, "venvs", None) is not None:
        check_file("--venvs", args.venvs)
    if getattr(args, "limits", None) is not None:
        check_file("--limits", args.limits)


# ---------------------------------------------------------------- grid size


def check_grid_size(sel: Selection) -> int:
    """The number of cells; more than ``MAX_GRID`` is refused before any cell is planned."""
    size = sel.size()
    if size > MAX_GRID:
        raise UsageError(
            f"--repeats {sel.repeats}: the grid would have {size:,} runs; at most {MAX_GRID:,} "
            "are allowed (narrow --frameworks/--tasks/--content/--swap/--models or lower --repeats)"
        )
    return size


# ---------------------------------------------------------------- the store


def check_unguarded_agents(sel: Selection, venvs: dict, guard) -> None:
    """Refuse a model that is not a reference model on an agent with its own tools (venvs.toml
    ``kind = "cli"``) when this invocation is unguarded (``guard``: ``--guard off``, or no
    bubblewrap here): the agent would run as the adapter's child, as the driver's user, under
    its own sandbox or none, with the run token in its environment (docs/adapter-authors.md). The
    reference models are harness code and do only what their policy says; a real model could
    make such an agent read any file or change another run's folder. Under the guard the whole
    agent is inside the harness's sandbox (claimgrid.launch.confine.agent_sandbox), as a
    library framework's commands are, and any model may drive it."""
    if guard is not None and guard.enabled:
        return
    agents = [name for name in sel.frameworks if venvs[name].is_cli]
    real = [m for m in sel.all_models if not reference_registry.is_reference(m)]
    if agents and real:
        why = getattr(guard, "reason", None) or "guard off"
        raise UsageError(
            f"--frameworks: {agents[0]} would run unguarded ({why}): its own tools as the driver's user, so "
            f"only reference models may drive it, not {real[0]}; run it with the guard on "
            f"(--guard on: bubblewrap) (docs/adapter-authors.md, agents with their own tools)"
        )


class StoredSelection(BaseModel):
    model_config = ConfigDict(extra="allow")
    frameworks: list[str] = Field(min_length=1)
    tasks: list[str] = Field(min_length=1)
    content: list[str] = Field(min_length=1)
    swap: list[str] = Field(min_length=1)
    models: list[str] = Field(min_length=1)
    substitute: str
    repeats: int = Field(ge=1, le=MAX_REPEATS)


class StoredMeta(BaseModel):
    """The fields of ``meta.json`` that ``--resume`` relies on; other fields are the ledger's."""

    model_config = ConfigDict(extra="allow")
    selection: StoredSelection
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    jobs: int = Field(ge=1)
    isolation: Literal["warm", "fresh"]
    max_model_calls: int = Field(ge=1, le=MAX_MODEL_CALLS)


def _read_json(path: Path, what: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, None, f"missing; {what}") from None
    except OSError as exc:
        raise DataError(path, None, f"cannot be read ({exc.strerror})") from None
    if not raw.strip():
        raise DataError(path, None, f"is empty; {what}")
    value, why = parse_json(raw)  # the store's bounded parser (size, NUL, depth)
    if why:
        raise DataError(path, None, f"is not readable: {why}")
    return value


def read_meta(folder: Path, flag: str = "--resume") -> dict:
    """A grid folder's ``meta.json``, checked for what a resume needs; one line if it is not usable."""
    if not folder.exists():
        raise UsageError(f"{flag} {folder}: no such folder")
    if not folder.is_dir():
        raise UsageError(f"{flag} {folder}: not a folder")
    path = folder / "meta.json"
    meta = _read_json(path, "not a grid folder written by grid.py run")
    if not isinstance(meta, dict):
        raise DataError(path, None, "expected a JSON object")
    meta = upgrade_meta(meta, path)  # an older format read in memory; a newer one is refused
    validate(StoredMeta, meta, path)
    return meta


def check_stored_names(meta: dict, path: Path, registries: dict[str, dict]) -> None:
    """Every name the stored grid selected still exists (a renamed task cannot be resumed)."""
    for key, registry in registries.items():
        for name in meta["selection"][key]:
            if name not in registry:
                raise DataError(
                    path,
                    f"selection.{key}",
                    f"'{name}' no longer exists; valid: {', '.join(sorted(registry)) or '(none)'}",
                )


def _show(value) -> str:
    return (
        ",".join(map(str, value))
        if isinstance(value, list | tuple)
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )


def check_resume(args, meta: dict, folder: Path) -> GridSpec:
    """The spec a resumed grid runs with: the stored one (``meta``, checked by ``read_meta``)
    with the flags given applied. A grid-defining flag whose value differs from the stored one
    is refused, naming the flag (given and equal is fine; names compare as sets)."""
    from pydantic import ValidationError

    if getattr(args, "out", None) is not None and Path(args.out).resolve() != folder.resolve():
        raise UsageError(f"--out {args.out} with --resume {folder}: a resumed grid is written where it was; drop --out")
    try:
        stored = GridSpec.from_meta(meta, flags.data_dirs(args), args.guard)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(folder / "meta.json", ".".join(map(str, err.get("loc", ()))) or None, err["msg"]) from None
    requested = flags.resumed_spec(args, stored)
    field = requested.differs_from(stored)
    if field is not None:
        dest, flag = flags.SPEC_FLAGS[field]
        want = stored.selection if field.startswith("selection.") else stored
        want = getattr(want, field.rpartition(".")[2])
        raise UsageError(
            f"{flag} {_show(getattr(args, dest))} differs from the stored grid's {_show(want)} in {folder}; "
            f"--resume finishes the grid as it was started: drop {flag}, or start a new grid"
        )
    return requested.model_copy(update={"selection": stored.selection})  # the stored order of names


def check_reclassify(folder: Path) -> list[RunRecord]:
    """Every record in ``runs.jsonl`` with readable evidence; returns the records.

    Checked whole before anything is rewritten, so a missing evidence folder leaves the
    ledger as it was.
    """
    check_dir("reclassify", folder)
    if not LedgerFolder(folder).has_runs():
        raise UsageError(f"reclassify {folder}: not a grid folder (no {RUNS_NAME})")
    return check_records(folder)


def check_records(folder: Path) -> list[RunRecord]:
    """The records of ``folder/runs.jsonl`` (none if it is absent), each with readable evidence.

    Read by the store's reader (:class:`claimgrid.store.reader.LedgerFolder`): a torn last
    line (the driver killed mid-write) is not a record and not an error, the store's repair()
    drops it; any other line that is not a typed run record, and any unreadable line of a
    run's ``events.jsonl``, is a DataError naming the file and the line (a sealed ledger's
    whole JSON line that is no record: the seal's account of it, StoreIntegrityError).
    """
    ledger = LedgerFolder(folder)
    try:
        lines = ledger.lines()
    except RecordError:
        # A whole JSON line that is no record: in a sealed ledger, a changed byte is named as
        # the line that fails its signature (as open_for_writing names it) before its field.
        sealed = verify_seal(folder)
        if sealed.problems:
            raise StoreIntegrityError(folder, sealed.problems + RunStore(folder).check_integrity()) from None
        raise
    records = []
    for i, rec in lines:
        where = f"{ledger.runs_path}:{i}"
        if rec.facts is None:
            raise DataError(where, "run_id/facts", "a run record needs a run_id and its facts")
        try:
            ledger.event_dicts(rec.run_id)
        except FileNotFoundError:
            raise DataError(
                where,
                None,
                f"the evidence of run {rec.run_id} is gone ({ledger.events_path(rec.run_id)} is missing); "
                "reclassify needs every run's evidence",
            ) from None
        records.append(rec)
    return records
