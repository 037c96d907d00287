"""Sealed ledgers: an ed25519 signature over ``meta.json``, every ``runs.jsonl`` line and every
run's ``manifest.json``, made with the publisher's key (docs/CONTRACTS.md, "Sealed ledgers").

The key. One private key per publisher, kept outside every ledger: the file named by
``--key``, else by ``$CLAIMGRID_KEY``, else ``$XDG_CONFIG_HOME/claimgrid/ed25519.pem``
(``~/.config/...``). A writer creates it on first use (mode 0600, PKCS#8 PEM); a key file
inside the ledger folder it writes is refused. Only the public key is written into the
ledger (``meta.json`` ``seal.public_key``, raw 32 bytes in base64).

What is signed, each message prefixed by its kind so a signature of one kind never
verifies as another (a line's signature is never a manifest's):

* ``meta.json``: its exact bytes up to the last member, ``"seal_signature"``, which holds
  the signature (:func:`seal_meta_text`, :func:`open_meta`);
* each ``runs.jsonl`` line: its exact bytes up to the last member, ``"seal"``, which holds
  ``{"manifest": <signature of the run's manifest.json>, "line": <signature of the rest of
  the line>, "place": <signature of where it stands>}`` (:func:`seal_line`, :func:`open_line`). Both messages carry the grid id, so
  a line or an evidence folder copied from another grid of the same publisher is refused;
* the files of an evidence folder are covered through its manifest (their sha256) and the
  line's ``evidence_sha256`` (the manifest's sha256);
* **the set of lines** (a seal whose ``seal.lines`` is present, :data:`CHAIN`): each line's
  ``place`` signature covers where it stands, its record number and the run id of the
  record before it, so a line removed, added or moved makes the next one fail at its place; and
  ``meta.json``'s ``seal.lines`` says how many records there were when it was last written
  (``count``), the sha256 of their run ids in order and the last one's run id, so lines
  cut off the end are named. A finished grid (``finished``) has exactly its sealed lines,
  ``grid_size`` of them, and their run ids are its ``plan`` (the planned run ids, sealed
  with meta.json). Lines appended after meta.json was last written (a grid killed mid-way)
  extend the chain and are checked by it; ``--resume`` writes meta.json again, sealing them.

Signing proves that the signed bytes are the ones the key's holder wrote and that nothing
changed since; it does not prove that what they say is true, nor who holds the key: a
publisher can sign a lie, and anyone can make a key. A reader compares the fingerprint
(``seal.fingerprint``, printed by every command that verifies) with the one the publisher
states elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from claimgrid.errors import ClaimgridError
from claimgrid.store.lines import RUNS_NAME, parse_json, run_id_problem

KEY_ENV = "CLAIMGRID_KEY"
ALGORITHM = "ed25519"
META_MEMBER = "seal_signature"
LINE_MEMBER = "seal"
CHAIN = 1  # seal.lines.chain: each line carries a place signature (record number, previous run id)

_B64 = rb"[A-Za-z0-9+/]{86}=="  # an ed25519 signature (64 bytes) in base64
# The last member of a sealed line: `, "seal": {"manifest": "...", "line": "..."}}` (json.dumps' separators).
# A chained seal (seal.lines in meta.json) adds `, "place": "..."` (:func:`_place_message`).
_LINE_TAIL = re.compile(
    rb', "seal": \{"manifest": "(' + _B64 + rb')", "line": "(' + _B64 + rb')"(?:, "place": "(' + _B64 + rb')")?\}\}$'
)
# The last member of a sealed meta.json (indent=2): `,\n  "seal_signature": "..."\n}` and a newline.
_META_TAIL = re.compile(rb',\n  "seal_signature": "(' + _B64 + rb')"\n\}\n?$')


class KeyError_(ClaimgridError):
    """The publisher's key cannot be read, made, or is in the wrong place."""


def default_key_path() -> Path:
    """``$CLAIMGRID_KEY``, else ``$XDG_CONFIG_HOME/claimgrid/ed25519.pem`` (``~/.config`` when unset)."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "claimgrid" / "ed25519.pem"


def fingerprint(public_key_b64: str) -> str:
    """``sha256:<16 hex>`` of the raw public key: what a publisher states so readers can check."""
    raw = base64.b64decode(public_key_b64)
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Signer:
    """A publisher's private key, and what of it goes into a ledger."""

    key: Ed25519PrivateKey
    path: Path

    @property
    def public_key(self) -> str:
        raw = self.key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.b64encode(raw).decode()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)

    def seal_facts(self) -> dict:
        """The ``seal`` member of meta.json: algorithm, public key, fingerprint."""
        return {"algorithm": ALGORITHM, "public_key": self.public_key, "fingerprint": self.fingerprint}

    def sign(self, message: bytes) -> str:
        return base64.b64encode(self.key.sign(message)).decode()


def load_key(path: Path | str | None = None, *, ledger: Path | None = None, flag: str = "--key") -> Signer:
    """The publisher's key at ``path`` (default :func:`default_key_path`), made when absent.

    One-line errors: a key file that is not an ed25519 private key, one that cannot be
    made, or one inside ``ledger`` (the folder about to be written: the private key is
    never part of what is published)."""
    where = Path(path).expanduser() if path is not None else default_key_path()
    source = f"{flag} {where}" if path is not None else f"the publisher key {where}"
    if ledger is not None:
        if where.resolve().is_relative_to(Path(ledger).resolve()):
            raise KeyError_(f"{source}: inside the ledger folder {ledger}; the private key is never published")
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        return _create_key(where, source)
    except OSError as exc:
        raise KeyError_(f"{source}: cannot be read ({exc.strerror or exc})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise KeyError_(f"{source}: not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyError_(f"{source}: not an ed25519 key")
    return Signer(key, where)


def _create_key(where: Path, source: str) -> Signer:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another writer made it meanwhile: use theirs
        return load_key(where)
    except OSError as exc:
        raise KeyError_(f"{source}: cannot be created ({exc.strerror or exc})") from None
    try:
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Signer(key, where)


# ---------------------------------------------------------------- messages


def _meta_message(body: bytes) -> bytes:
    return b"claimgrid meta.json\0" + body


def _line_message(grid_id: str, body: bytes) -> bytes:
    return b"claimgrid runs.jsonl line\0" + grid_id.encode() + b"\0" + body


def _place_message(grid_id: str, body: bytes, place: tuple[int, str]) -> bytes:
    """Where a line stands: ``place`` is (its record number from 1, the previous record's run
    id or "" for the first); the line by its sha256."""
    number, previous = place
    head = b"claimgrid runs.jsonl place\0" + grid_id.encode() + b"\0" + str(number).encode() + b"\0"
    return head + previous.encode("utf-8", "surrogatepass") + b"\0" + hashlib.sha256(body).hexdigest().encode()


def run_ids_digest(run_ids: list[str]) -> str:
    """The sha256 of run ids in order (``seal.lines.run_ids_sha256``)."""
    h = hashlib.sha256()
    for run_id in run_ids:
        h.update(run_id.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def lines_facts(run_ids: list[str]) -> dict:
    """``seal.lines`` of meta.json for a ``runs.jsonl`` holding records of ``run_ids``, in order."""
    return {
        "chain": CHAIN,
        "count": len(run_ids),
        "run_ids_sha256": run_ids_digest(run_ids),
        "last_run_id": run_ids[-1] if run_ids else None,
    }


def _manifest_message(grid_id: str, run_id: str, manifest: bytes) -> bytes:
    return b"claimgrid manifest.json\0" + grid_id.encode() + b"\0" + run_id.encode() + b"\0" + manifest


def seal_meta_text(meta: dict, signer: Signer, run_ids: list[str] | None = None) -> str:
    """``meta`` as sealed meta.json text: its ``seal`` facts (with ``lines`` over ``run_ids``,
    the records of ``runs.jsonl`` in order), then the signature as the last member."""
    meta = {k: v for k, v in meta.items() if k != META_MEMBER}
    meta["seal"] = signer.seal_facts() | {"lines": lines_facts(list(run_ids or []))}
    body = json.dumps(meta, indent=2, default=str)
    assert body.endswith("\n}")  # a non-empty object at indent 2
    signature = signer.sign(_meta_message(body.encode()))
    return body[:-2] + f',\n  "{META_MEMBER}": "{signature}"\n}}\n'


def open_meta(raw: bytes) -> tuple[bytes, str] | None:
    """(the signed bytes, the signature) of a sealed meta.json; None without a signature member."""
    m = _META_TAIL.search(raw)
    if m is None:
        return None
    return raw[: m.start()] + b"\n}", m.group(1).decode()


def seal_line(record: dict, dumps, signer: Signer, grid_id: str, manifest: bytes | None, place: tuple[int, str]) -> str:
    """One sealed ``runs.jsonl`` line (without its newline): ``dumps(record)`` with the seal as
    its last member. ``manifest``: the bytes of the run's manifest.json (None: no evidence
    folder, signed as empty); ``place``: its record number (from 1) and the run id of the
    record before it ("" for the first)."""
    body = dumps({k: v for k, v in record.items() if k != LINE_MEMBER})
    assert body.endswith("}") and body != "{}"
    seal = {
        "manifest": signer.sign(_manifest_message(grid_id, str(record.get("run_id")), manifest or b"")),
        "line": signer.sign(_line_message(grid_id, body.encode())),
        "place": signer.sign(_place_message(grid_id, body.encode(), place)),
    }
    return body[:-1] + ", " + json.dumps({LINE_MEMBER: seal})[1:]


def open_line(raw: bytes) -> tuple[bytes, str, str, str | None] | None:
    """(the signed bytes, manifest signature, line signature, place signature or None) of a
    sealed line; None when unsealed."""
    m = _LINE_TAIL.search(raw.rstrip(b"\r"))
    if m is None:
        return None
    place = m.group(3).decode() if m.group(3) else None
    return raw[: m.start()] + b"}", m.group(1).decode(), m.group(2).decode(), place


# ---------------------------------------------------------------- verifying


def _verifier(public_key_b64: str) -> Ed25519PublicKey | None:
    try:
        raw = base64.b64decode(public_key_b64, validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError):
        return None


def _ok(key: Ed25519PublicKey, signature_b64: str, message: bytes) -> bool:
    try:
        key.verify(base64.b64decode(signature_b64), message)
        return True
    except (InvalidSignature, ValueError):
        return False


@dataclass
class SealReport:
    """What :func:`verify_seal` found: ``sealed`` (meta.json carries a seal), the public key's
    fingerprint, whether the set of lines is sealed (``chained``), and one problem per file or
    line that fails, each naming it; ``torn``: a torn last line of ``runs.jsonl`` (a kill
    mid-append; a writer's repair drops it, a reader refuses it)."""

    folder: Path
    sealed: bool = False
    public_key: str | None = None
    fingerprint: str | None = None
    chained: bool = False
    problems: list[str] = field(default_factory=list)
    torn: str | None = None
    # An unsealed ledger's records against meta.json's plan, finished and grid_size
    # (:func:`plan_problems`): what a reader that accepts it (--allow-unsealed) reports.
    unsealed_problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for the terminal: sealed by which key, or unsealed."""
        if not self.sealed:
            return f"{self.folder}: not sealed (no seal in meta.json): its integrity rests on its own hashes only"
        if not self.chained:
            return (
                f"{self.folder}: seal verified (ed25519, key {self.fingerprint}); its lines are sealed one by one, "
                "not as a set (sealed before seal.lines): a removed line is not detected"
            )
        return f"{self.folder}: seal verified (ed25519, key {self.fingerprint}; every line, in order)"


def verify_seal(folder: Path) -> SealReport:
    """Check every signature of the ledger at ``folder``; never raises for bad content.

    Problems name the file (``meta.json``, ``runs/<id>/manifest.json``) or the line
    (``runs.jsonl line N (run <id>)``). A ledger whose meta.json has no seal is reported
    unsealed; then any sealed line is a problem (a seal was removed from meta.json). A torn
    last line (a kill mid-append, :mod:`claimgrid.store.lines`) is not a record: it is
    reported in :attr:`SealReport.torn`, not checked. Every line and meta.json are read by
    the one bounded parser (:func:`claimgrid.store.lines.parse_json`). The evidence files
    themselves are checked against their manifest by
    :meth:`claimgrid.store.folder.RunStore.check_integrity`."""
    folder = Path(folder)
    report = SealReport(folder)
    meta_path = folder / "meta.json"
    try:
        raw_meta = meta_path.read_bytes()
    except FileNotFoundError:
        raw_meta = b""  # no meta.json: unsealed (a sealed line is then named below)
    except OSError as exc:
        report.problems.append(f"meta.json: cannot be read ({exc.strerror or exc})")
        return report
    meta: dict = {}
    if raw_meta:
        value, why = parse_json(raw_meta)
        if not isinstance(value, dict):
            report.problems.append(f"meta.json: {why or 'expected a JSON object'}")
            return report
        meta = value
    seal = meta.get("seal")
    grid_id = str(meta.get("grid_id"))
    key = None
    if seal is not None:
        report.sealed = True
        if not isinstance(seal, dict) or seal.get("algorithm") != ALGORITHM:
            report.problems.append("meta.json: field 'seal' is not an ed25519 seal")
            return report
        report.public_key = str(seal.get("public_key"))
        key = _verifier(report.public_key)
        if key is None:
            report.problems.append("meta.json: field 'seal.public_key' is not an ed25519 public key")
            return report
        report.fingerprint = fingerprint(report.public_key)
        opened = open_meta(raw_meta)
        if opened is None:
            report.problems.append(f"meta.json: sealed but its '{META_MEMBER}' is missing or moved")
        elif not _ok(key, opened[1], _meta_message(opened[0])):
            report.problems.append("meta.json: signature does not match its content (changed after sealing)")
        lines = seal.get("lines")
        if lines is not None:
            if not isinstance(lines, dict) or lines.get("chain") != CHAIN or not isinstance(lines.get("count"), int):
                report.problems.append("meta.json: field 'seal.lines' is not a chained-lines seal")
                return report
            report.chained = True
    elif META_MEMBER in meta:
        report.problems.append(f"meta.json: '{META_MEMBER}' without a 'seal' (its seal was removed)")
    run_ids = _verify_lines(folder, key, grid_id, report)
    if report.chained and run_ids is not None and not report.problems:
        _verify_set(meta, run_ids, report)
    if not report.sealed and run_ids is not None:
        report.unsealed_problems = plan_problems(meta, run_ids)
    return report


def _verify_lines(folder: Path, key: Ed25519PublicKey | None, grid_id: str, report: SealReport) -> list[str] | None:
    """Each line's signatures (at its place when chained); the run ids of the records in order."""
    try:
        data = (folder / RUNS_NAME).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        report.problems.append(f"{RUNS_NAME}: cannot be read ({exc.strerror or exc})")
        return None
    chunks = data.split(b"\n")
    tail = chunks.pop()
    if tail.strip():
        if isinstance(parse_json(tail)[0], dict):
            chunks.append(tail)  # a whole record whose newline was lost: checked like the others
        else:  # a torn last line: not a record (the store's repair drops it)
            report.torn = (
                f"{RUNS_NAME} line {len(chunks) + 1}: a torn last line ({len(tail)} bytes, not a whole JSON object: "
                "a kill mid-write, or appended by hand); `grid.py run --resume` drops it"
            )
    run_ids: list[str] = []
    previous = ""
    misplaced = False
    for number, raw in enumerate(chunks, 1):
        if not raw.strip():
            continue
        where = f"{RUNS_NAME} line {number}"
        value, why = parse_json(raw)
        if not isinstance(value, dict):
            report.problems.append(f"{where}: {why or 'expected a JSON object'}")
            return None  # a line that is not a record: no place after it can be checked
        run_id = value.get("run_id")
        bad_id = run_id_problem(run_id)
        if bad_id is not None or not isinstance(run_id, str):
            report.problems.append(f"{where}: {bad_id}")
            return None
        where += f" (run {run_id})"
        place = (len(run_ids) + 1, previous) if report.chained else None
        run_ids.append(run_id)
        previous = run_id
        opened = open_line(raw)
        if key is None:
            if opened is not None:
                report.problems.append(f"{where}: sealed, but meta.json has no seal (its seal was removed)")
            continue
        if opened is None:
            report.problems.append(f"{where}: not sealed (its seal is missing, or the line was added or rewritten)")
            continue
        body, manifest_sig, line_sig, place_sig = opened
        if not _ok(key, line_sig, _line_message(grid_id, body)):
            report.problems.append(f"{where}: signature does not match the line (changed after sealing)")
        elif place is not None and (place_sig is None or not _ok(key, place_sig, _place_message(grid_id, body, place))):
            report.problems.append(
                f"{where}: not at its sealed place (record {place[0]}, after "
                f"{'run ' + place[1] if place[1] else 'no other'}): a line before it was removed, added or moved"
            )
            report.chained = False  # one break names it: the lines after it are checked one by one
            misplaced = True
        manifest_path = folder / "runs" / run_id / "manifest.json"
        try:
            manifest = manifest_path.read_bytes()
        except OSError:
            manifest = b""  # a missing manifest: named by the store's integrity check
        if manifest and not _ok(key, manifest_sig, _manifest_message(grid_id, run_id, manifest)):
            report.problems.append(f"runs/{run_id}/manifest.json: signature does not match (changed after sealing)")
    report.chained = report.chained or misplaced  # the seal is chained; its set failed above
    return run_ids


def _verify_set(meta: dict, run_ids: list[str], report: SealReport) -> None:
    """The records against meta.json's sealed ``seal.lines``, ``plan``, ``finished`` and ``grid_size``."""
    lines = meta["seal"]["lines"]
    count = lines["count"]
    where = f"{RUNS_NAME} (meta.json sealed {count} record(s), the last run {lines.get('last_run_id')})"
    if len(run_ids) < count:
        report.problems.append(
            f"{where}: holds {len(run_ids)}: line(s) {len(run_ids) + 1} to {count} of the sealed set were removed"
        )
        return
    if run_ids_digest(run_ids[:count]) != lines.get("run_ids_sha256"):
        report.problems.append(f"{where}: its first {count} records are not the sealed ones, in order")
        return
    report.problems += plan_problems(meta, run_ids, count)


def plan_problems(meta: dict, run_ids: list[str], count: int | None = None) -> list[str]:
    """The records' run ids (in order) against meta.json's ``plan``, ``finished`` and
    ``grid_size``: one problem per difference. ``count``: how many records meta.json sealed
    (None for an unsealed ledger: then every record is counted). Used for a sealed set (after
    its chain verified) and, with ``--allow-unsealed``, for an unsealed one."""
    problems: list[str] = []
    plan = meta.get("plan")
    planned = set(plan) if isinstance(plan, list) else None
    if planned is not None:
        for number, run_id in enumerate(run_ids, 1):
            if run_id not in planned:
                problems.append(f"{RUNS_NAME} record {number} (run {run_id}): not a run of meta.json's plan")
    if meta.get("finished"):
        size = meta.get("grid_size")
        if count is None:
            if isinstance(size, int) and len(run_ids) != size:
                problems.append(
                    f"meta.json: finished with grid_size {size}, but {RUNS_NAME} holds {len(run_ids)} record(s)"
                )
        else:
            if len(run_ids) > count:
                problems.append(
                    f"{RUNS_NAME} record {count + 1} (run {run_ids[count]}): after the last line of a finished grid "
                    f"(meta.json sealed {count})"
                )
            if isinstance(size, int) and count != size:
                problems.append(f"meta.json: finished with {count} sealed record(s), but its grid_size is {size}")
        if planned is not None:
            missing = sorted(planned - set(run_ids))
            if missing:
                problems.append(
                    f"{RUNS_NAME}: finished, but {len(missing)} planned run(s) have no line: "
                    + ", ".join(missing[:5])
                    + (" ..." if len(missing) > 5 else "")
                )
    return problems
