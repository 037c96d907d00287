"""The run store: one ledger folder per grid run, append-only ``runs.jsonl``, write-once evidence.

Crash safety: a run's evidence folder is written completely (into a temporary name, then
renamed) *before* its line is appended to ``runs.jsonl`` and fsynced. A line in
``runs.jsonl`` therefore always has its evidence; a kill at any moment loses at most the
runs in flight, and ``--resume`` re-runs exactly the cells without a line.

Integrity (see docs/CONTRACTS.md, "Store integrity"); every file is written through
:mod:`claimgrid.store.inert` (a new temporary renamed into place, never a planted symlink),
and nothing is deleted (what a repair sets aside goes to ``quarantine/``):

* **One writer per folder.** A writer holds an ``flock`` on ``<folder>/.lock`` (which
  names its pid and command) for as long as it lives; a second writer stops with one
  line naming the holder. The kernel releases the lock when the holder dies, kill -9
  included.
* **Manifests.** Each evidence folder has ``manifest.json`` (sha256 of every file); the
  run's line in ``runs.jsonl`` carries the manifest's own sha256 (``evidence_sha256``).
  :meth:`RunStore.check_integrity` lists every tampered, missing or extra file by run
  id. Files named in :data:`DERIVED_FILES` are rendered from the evidence afterwards,
  are not in the manifest and are neither checked nor "extra".
* **Seal.** A store given the publisher's key (:attr:`RunStore.signer`,
  :mod:`claimgrid.store.seal`) signs meta.json, every line it appends or rewrites and each
  run's manifest (in the run's line); :func:`claimgrid.store.seal.verify_seal` checks them.
* **Torn lines.** One rule, in :mod:`claimgrid.store.lines` (the only reader of
  ``runs.jsonl`` and ``events.jsonl``): a torn *last* line of ``runs.jsonl`` (a kill
  mid-append) is not a record and is set aside by :meth:`repair` (into ``quarantine/``),
  which says so; an
  unreadable line anywhere else is an error naming its line number.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from claimgrid.anybytes import json_text, utf8
from claimgrid.errors import ClaimgridError
from claimgrid.store.inert import open_append, open_lock, plain_name, quarantine, quarantine_bytes, write_file
from claimgrid.store.lines import EVENTS_NAME, RUNS_NAME, read_json_object, run_id_problem, scan_runs
from claimgrid.store.reader import LedgerFolder
from claimgrid.store.record import RunRecord, dump
from claimgrid.store.seal import META_MEMBER, Signer, seal_line, seal_meta_text
from claimgrid.store.upgrade import stamp, upgrade_meta

# Files rendered into an evidence folder from its evidence (not evidence themselves):
# not in the manifest, ignored by the integrity check.
DERIVED_FILES = frozenset({"RUN.md"})
LOCK_NAME = ".lock"


class StoreBusy(ClaimgridError):
    """Another process holds the folder's writer lock."""


class StoreIntegrityError(ClaimgridError):
    """The stored evidence or ``runs.jsonl`` does not match what was written."""

    def __init__(self, folder: Path, problems: list[str]):
        self.problems = problems
        super().__init__(
            f"{folder}: {len(problems)} evidence problem(s); nothing was changed:\n  " + "\n  ".join(problems)
        )


def _dump(obj) -> str:
    # Lone surrogates (model text, non-UTF-8 file names) are written as JSON escapes:
    # lossless, and the line always encodes (claimgrid.anybytes).
    return json_text(obj, ensure_ascii=False, sort_keys=False, default=str)


class RunStore:
    """A ledger folder: ``meta.json``, ``runs.jsonl``, ``runs/<run_id>/``."""

    def __init__(self, folder: Path, signer: Signer | None = None):
        self.folder = Path(folder)
        self.signer = signer  # the publisher's key: what this store writes is sealed with it
        self.runs_dir = self.folder / "runs"
        self.runs_path = self.folder / RUNS_NAME
        self.meta_path = self.folder / "meta.json"
        self.lock_path = self.folder / LOCK_NAME
        self._lock = threading.Lock()
        self._lock_fd: int | None = None
        self._manifest_sha: dict[str | None, str] = {}
        self._manifest_bytes: dict[str, bytes] = {}
        self._grid_id: str | None = None
        self._run_ids: list[str] | None = None  # the records' run ids in order (the chain's state)

    # ---- the writer lock
    def acquire(self, command: str) -> None:
        """Become the folder's only writer, or raise :class:`StoreBusy` naming the holder."""
        if self._lock_fd is not None:
            return
        fd = open_lock(self.lock_path)  # O_NOFOLLOW, a regular file this user owns (claimgrid.store.inert)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreBusy(
                f"{self.folder}: in use by {self.holder() or 'another process'}; one writer per ledger folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "command": command}).encode() + b"\n")
        self._lock_fd = fd

    def probe(self) -> None:
        """:class:`StoreBusy` when another process holds the lock; changes nothing in the folder."""
        if self._lock_fd is not None:  # this store holds it
            return
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreBusy(
                f"{self.folder}: in use by {self.holder() or 'another process'}; one writer per ledger folder"
            ) from None
        finally:
            os.close(fd)

    def holder(self) -> str | None:
        """``pid N (command)`` of the lock's holder, as it wrote it."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                info = json.loads(os.read(fd, 4096))
            finally:
                os.close(fd)
            return f"pid {info['pid']} ({info['command']})"
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ---- meta
    def create(self, meta: dict, command: str = "") -> None:
        """Make a new ledger folder, locked by this process; an existing one is an error."""
        try:
            self.folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            if self.lock_path.is_file() and not self.lock_path.is_symlink():
                self.probe()  # raises StoreBusy when a writer holds it; writes nothing
            raise ClaimgridError(f"{self.folder}: already exists; finish it with --resume {self.folder}") from None
        self.acquire(command or meta.get("command", ""))
        self.runs_dir.mkdir()
        self.write_meta(meta)
        write_file(self.runs_path, b"")

    def read_meta(self) -> dict:
        """meta.json's object (the bounded parser: DataError naming the file when it is not
        one), at this code's format version (:func:`~claimgrid.store.upgrade.upgrade_meta`: an
        older one upgraded in memory, a newer one a DataError naming the file and field)."""
        return upgrade_meta(read_json_object(self.meta_path), self.meta_path)

    def write_meta(self, meta: dict) -> None:
        """meta.json, replaced whole, stamped with this code's ``format_version`` (``meta`` is
        this version's: built here or read by :meth:`read_meta`); sealed (its ``seal`` facts
        and signature) with :attr:`signer`."""
        meta = stamp(meta)
        self._grid_id = str(meta.get("grid_id"))
        if self.signer is not None:
            text = seal_meta_text(meta, self.signer, self._chain())
        else:
            text = json_text({k: v for k, v in meta.items() if k not in ("seal", META_MEMBER)}, indent=2, default=str)
            text += "\n"
        write_file(self.meta_path, utf8(text))

    def _chain(self) -> list[str]:
        """The run ids of the records of ``runs.jsonl`` in order (read once, then kept)."""
        if self._run_ids is None:
            self._run_ids = [str(rec.get("run_id")) for _, rec in scan_runs(self.runs_path).lines]
        return self._run_ids

    def _line(self, record: dict, manifest: bytes | None = None, place: tuple[int, str] | None = None) -> bytes:
        """One record's line with its newline: sealed with :attr:`signer` when there is one, at
        ``place`` (its record number and the previous run id; default: after the last record)."""
        record = {k: v for k, v in record.items() if k != "seal"}
        if self._grid_id is None and self.signer is not None and self.meta_path.exists():
            self._grid_id = str(self.read_meta().get("grid_id"))
        if self.signer is None or self._grid_id is None:  # no meta.json: nothing to seal against
            return utf8(_dump(record) + "\n")
        run_id = str(record.get("run_id"))
        if manifest is None:
            try:
                manifest = (self.runs_dir / run_id / "manifest.json").read_bytes()
            except OSError:
                manifest = None
        if place is None:
            chain = self._chain()
            place = (len(chain) + 1, chain[-1] if chain else "")
        return utf8(seal_line(record, _dump, self.signer, self._grid_id, manifest, place) + "\n")

    # ---- records
    def repair(self) -> str | None:
        """Set a kill's leftovers aside: a torn last line of ``runs.jsonl`` and evidence folders
        that never got a line are moved into ``quarantine/<stamp>/`` (:mod:`claimgrid.store.inert`)
        and named; nothing is deleted (a folder without a line may be the evidence of a line
        someone removed: whoever reads the ledger decides).

        Returns a one-line note of what was moved (None when nothing was). A bad line that is
        not the last is never repaired: it raises :class:`StoreIntegrityError` naming its line
        before anything is changed.
        """
        notes = []
        records, problems = self.scan()
        if problems:
            raise StoreIntegrityError(self.folder, problems)
        found = scan_runs(self.runs_path)
        if found.torn is not None:
            data = self.runs_path.read_bytes()
            cut = data.rfind(b"\n") + 1
            kept = quarantine_bytes(self.folder, RUNS_NAME, data[cut:])
            write_file(self.runs_path, data[:cut])
            notes.append(
                f"dropped a torn last line (line {found.torn.number}, {found.torn.size} bytes) of "
                f"{self.runs_path.name}: a kill mid-write; that cell runs again (its bytes kept in "
                f"{kept.relative_to(self.folder)})"
            )
        elif found.lines and self.runs_path.read_bytes()[-1:] != b"\n":
            fd = open_append(self.runs_path)  # a whole last record, only its newline missing
            try:
                os.write(fd, b"\n")
            finally:
                os.close(fd)
        done = {r["run_id"] for r in records}
        orphans = [c for c in (self.runs_dir.iterdir() if self.runs_dir.exists() else ()) if c.name not in done]
        moved = quarantine(self.folder, sorted(orphans))
        named = [c.name for c in orphans if not c.name.startswith(".")]
        if moved is not None:
            notes.append(
                f"moved {len(named)} evidence folder(s) of runs without a line"
                + (f" ({', '.join(named[:5])}{' ...' if len(named) > 5 else ''})" if named else "")
                + (
                    f" and {len(orphans) - len(named)} unfinished temporary folder(s)"
                    if len(orphans) > len(named)
                    else ""
                )
                + f" to {moved.relative_to(self.folder)} (in flight at a kill, or their line was removed)"
            )
        self._run_ids = None  # read again: the torn line is gone
        return "; ".join(notes) or None

    def scan(self) -> tuple[list[dict], list[str]]:
        """(records, problems): every run record of ``runs.jsonl``, and one problem per line
        that is not a JSON run record, by line number. A torn last line (a kill mid-append,
        see :mod:`claimgrid.store.lines`) is not a record and not a problem: :meth:`repair`
        drops it."""
        found = scan_runs(self.runs_path)
        out, problems = [], []
        bad = [number for number, _ in found.bad]
        why = dict(found.bad)
        for number, rec in found.lines:
            wrong = run_id_problem(rec.get("run_id"))
            if wrong is None:
                out.append(rec)
            else:
                bad.append(number)
                why[number] = wrong
        for number in sorted(bad):
            problems.append(f"{self.runs_path.name} line {number}: not a JSON run record: {why[number]}")
        return out, problems

    def records(self) -> list[dict]:
        """Every run record; raises :class:`StoreIntegrityError` for an unreadable line
        (other than a torn last one), never drops it in silence."""
        out, problems = self.scan()
        if problems:
            raise StoreIntegrityError(self.folder, problems)
        return out

    def completed_ids(self) -> set[str]:
        return {r["run_id"] for r in self.records()}

    def append(self, record: RunRecord | dict) -> None:
        """Append one run's line (a typed record is written as :func:`~claimgrid.store.record.dump`
        makes it); the line carries the sha256 of the run's manifest (written by
        :meth:`write_evidence` in this process) as ``evidence_sha256``: the writer's fact, set
        on the line it writes, never on the record the caller holds."""
        record = dump(record) if isinstance(record, RunRecord) else record
        sha = self._manifest_sha.pop(record.get("run_id"), None)
        if sha and not record.get("evidence_sha256"):  # a typed record's dump carries the key as None
            record["evidence_sha256"] = sha
        manifest = self._manifest_bytes.pop(str(record.get("run_id")), None)
        with self._lock:  # the line's place is the chain's end: taken and extended under the lock
            line = self._line(record, manifest)
            fd = open_append(self.runs_path)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._chain().append(str(record.get("run_id")))

    def rewrite(self, records: list[dict]) -> None:
        """``runs.jsonl`` replaced whole by ``records`` (each line sealed as :meth:`append` does)."""
        ids = [str(r.get("run_id")) for r in records]
        lines = (self._line(r, place=(i + 1, ids[i - 1] if i else "")) for i, r in enumerate(records))
        write_file(self.runs_path, b"".join(lines))
        self._run_ids = ids

    # ---- evidence
    def write_evidence(self, run_id: str, files: dict[str, str | bytes | dict | list]) -> Path:
        """Write one run's evidence folder once, with a sha256 manifest; files end read-only.

        Any content is written (claimgrid.anybytes): JSON files keep lone surrogates as
        escapes (lossless); in a text file a surrogate from an undecodable byte is that byte
        again and any other is the visible text ``\\udXXX`` (the runner records how many
        as the run's ``limits.text_substituted``)."""
        final = self.runs_dir / run_id
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{run_id}.", suffix=".tmp", dir=self.runs_dir))
        tmp.chmod(0o755)  # as a plain mkdir makes it: the evidence is published, readable
        manifest = {}
        for name, content in files.items():
            if isinstance(content, (dict, list)) and name.endswith(".jsonl"):
                data = utf8("".join(_dump(e) + "\n" for e in content))
            elif isinstance(content, (dict, list)):
                data = utf8(json_text(content, ensure_ascii=True, indent=2, default=str) + "\n")
            elif isinstance(content, str):
                data = utf8(content)
            else:
                data = content or b""
            (tmp / plain_name(name)).write_bytes(data)  # a new private folder: flat, fresh names
            manifest[name] = hashlib.sha256(data).hexdigest()
        manifest_bytes = (json.dumps({"sha256": manifest}, indent=2) + "\n").encode()
        (tmp / "manifest.json").write_bytes(manifest_bytes)
        self._manifest_sha[run_id] = hashlib.sha256(manifest_bytes).hexdigest()
        self._manifest_bytes[run_id] = manifest_bytes
        for p in tmp.iterdir():
            p.chmod(0o444)
        if final.exists() or final.is_symlink():  # a previous attempt died before its line: kept aside
            quarantine(self.folder, [final])
        os.replace(tmp, final)
        return final

    def events_path(self, run_id: str) -> Path:
        return self.runs_dir / run_id / EVENTS_NAME

    def load_events(self, run_id: str) -> list[dict]:
        """One run's events as plain dicts (:meth:`claimgrid.store.reader.LedgerFolder.event_dicts`)."""
        return LedgerFolder(self.folder).event_dicts(run_id)

    def verify_manifest(self, run_id: str, expected_sha: str | None = None) -> list[str]:
        """Problems of one evidence folder, each ``"<kind> <file>"``: ``tampered``, ``missing``
        or ``extra`` (a file neither in the manifest nor in :data:`DERIVED_FILES`)."""
        folder = self.runs_dir / run_id
        if not folder.is_dir():
            return ["missing evidence folder"]
        try:
            raw = (folder / "manifest.json").read_bytes()
            manifest = json.loads(raw)["sha256"]
            if not isinstance(manifest, dict):
                raise ValueError
        except (OSError, ValueError, KeyError, TypeError):
            return ["missing manifest.json" if not (folder / "manifest.json").exists() else "tampered manifest.json"]
        problems = []
        if expected_sha and hashlib.sha256(raw).hexdigest() != expected_sha:
            problems.append("tampered manifest.json")
        for name, digest in manifest.items():
            if not isinstance(name, str) or "/" in name or name in (".", "..") or "\0" in name:
                problems.append(f"tampered manifest.json (names {name!r}, not a file of the folder)")
                continue
            path = folder / name
            if not path.is_file() or path.is_symlink():
                problems.append(f"missing {name}")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                problems.append(f"tampered {name}")
        for child in sorted(folder.iterdir()):
            if child.name not in manifest and child.name != "manifest.json" and child.name not in DERIVED_FILES:
                problems.append(f"extra {child.name}")
        return problems

    def check_integrity(self) -> list[str]:
        """Every problem of the folder, one line each: unreadable ``runs.jsonl`` lines by line
        number, duplicate run ids, and each run's tampered, missing or extra files by run id."""
        records, problems = self.scan()
        seen: dict[str, int] = {}
        for rec in records:
            run_id = rec["run_id"]
            if run_id in seen:
                problems.append(f"run {run_id}: more than one line in {self.runs_path.name}")
                continue
            seen[run_id] = 1
            problems += [f"run {run_id}: {p}" for p in self.verify_manifest(run_id, rec.get("evidence_sha256"))]
        return problems
