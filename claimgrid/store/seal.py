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
  the line>}`` (:func:`seal_line`, :func:`open_line`). Both messages carry the grid id, so
  a line or an evidence folder copied from another grid of the same publisher is refused;
* the files of an evidence folder are covered through its manifest (their sha256) and the
  line's ``evidence_sha256`` (the manifest's sha256).

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
from claimgrid.store.lines import RUNS_NAME

KEY_ENV = "CLAIMGRID_KEY"
ALGORITHM = "ed25519"
META_MEMBER = "seal_signature"
LINE_MEMBER = "seal"

_B64 = rb"[A-Za-z0-9+/]{86}=="  # an ed25519 signature (64 bytes) in base64
# The last member of a sealed line: `, "seal": {"manifest": "...", "line": "..."}}` (json.dumps' separators).
_LINE_TAIL = re.compile(rb', "seal": \{"manifest": "(' + _B64 + rb')", "line": "(' + _B64 + rb')"\}\}$')
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


def _manifest_message(grid_id: str, run_id: str, manifest: bytes) -> bytes:
    return b"claimgrid manifest.json\0" + grid_id.encode() + b"\0" + run_id.encode() + b"\0" + manifest


def seal_meta_text(meta: dict, signer: Signer) -> str:
    """``meta`` as sealed meta.json text: its ``seal`` facts, then the signature as the last member."""
    meta = {k: v for k, v in meta.items() if k != META_MEMBER}
    meta["seal"] = signer.seal_facts()
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


def seal_line(record: dict, dumps, signer: Signer, grid_id: str, manifest: bytes | None) -> str:
    """One sealed ``runs.jsonl`` line (without its newline): ``dumps(record)`` with the seal as
    its last member. ``manifest``: the bytes of the run's manifest.json (None: no evidence
    folder, signed as empty)."""
    body = dumps({k: v for k, v in record.items() if k != LINE_MEMBER})
    assert body.endswith("}") and body != "{}"
    seal = {
        "manifest": signer.sign(_manifest_message(grid_id, str(record.get("run_id")), manifest or b"")),
        "line": signer.sign(_line_message(grid_id, body.encode())),
    }
    return body[:-1] + ", " + json.dumps({LINE_MEMBER: seal})[1:]


def open_line(raw: bytes) -> tuple[bytes, str, str] | None:
    """(the signed bytes, manifest signature, line signature) of a sealed line; None when unsealed."""
    m = _LINE_TAIL.search(raw.rstrip(b"\r"))
    if m is None:
        return None
    return raw[: m.start()] + b"}", m.group(1).decode(), m.group(2).decode()


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
    fingerprint, and one problem per file or line that fails, each naming it."""

    folder: Path
    sealed: bool = False
    public_key: str | None = None
    fingerprint: str | None = None
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for the terminal: sealed by which key, or unsealed."""
        if not self.sealed:
            return f"{self.folder}: not sealed (no seal in meta.json): its integrity rests on its own hashes only"
        return f"{self.folder}: seal verified (ed25519, key {self.fingerprint})"


def verify_seal(folder: Path) -> SealReport:
    """Check every signature of the ledger at ``folder``; never raises for bad content.

    Problems name the file (``meta.json``, ``runs/<id>/manifest.json``) or the line
    (``runs.jsonl line N (run <id>)``). A ledger whose meta.json has no seal is reported
    unsealed; then any sealed line is a problem (a seal was removed from meta.json). A torn
    last line (a kill mid-append, :mod:`claimgrid.store.lines`) is not a record and is not
    checked. The evidence files themselves are checked against their manifest by
    :meth:`claimgrid.store.folder.RunStore.check_integrity`."""
    folder = Path(folder)
    report = SealReport(folder)
    meta_path = folder / "meta.json"
    try:
        raw_meta = meta_path.read_bytes()
        meta = json.loads(raw_meta)
        if not isinstance(meta, dict):
            raise ValueError
    except FileNotFoundError:
        raw_meta, meta = b"", {}  # no meta.json: unsealed (a sealed line is then named below)
    except (OSError, ValueError):
        report.problems.append("meta.json: not a JSON object")
        return report
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
    elif META_MEMBER in meta:
        report.problems.append(f"meta.json: '{META_MEMBER}' without a 'seal' (its seal was removed)")
    _verify_lines(folder, key, grid_id, report)
    return report


def _verify_lines(folder: Path, key: Ed25519PublicKey | None, grid_id: str, report: SealReport) -> None:
    try:
        data = (folder / RUNS_NAME).read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        report.problems.append(f"{RUNS_NAME}: cannot be read ({exc.strerror or exc})")
        return
    chunks = data.split(b"\n")
    tail = chunks.pop()
    if tail.strip():
        try:
            json.loads(tail)
            chunks.append(tail)  # a whole record whose newline was lost: checked like the others
        except ValueError:
            pass  # a torn last line: not a record (the store's repair drops it)
    for number, raw in enumerate(chunks, 1):
        if not raw.strip():
            continue
        where = f"{RUNS_NAME} line {number}"
        try:
            run_id = json.loads(raw).get("run_id")
            where += f" (run {run_id})"
        except (ValueError, AttributeError):
            run_id = None
        opened = open_line(raw)
        if key is None:
            if opened is not None:
                report.problems.append(f"{where}: sealed, but meta.json has no seal (its seal was removed)")
            continue
        if opened is None:
            report.problems.append(f"{where}: not sealed (its seal is missing or the line was rewritten)")
            continue
        body, manifest_sig, line_sig = opened
        if not _ok(key, line_sig, _line_message(grid_id, body)):
            report.problems.append(f"{where}: signature does not match the line (changed after sealing)")
        if not isinstance(run_id, str) or "/" in run_id or run_id.startswith("."):
            continue  # not a run record: the store's own checks name it
        manifest_path = folder / "runs" / run_id / "manifest.json"
        try:
            manifest = manifest_path.read_bytes()
        except OSError:
            manifest = b""  # a missing manifest: named by the store's integrity check
        if manifest and not _ok(key, manifest_sig, _manifest_message(grid_id, run_id, manifest)):
            report.problems.append(f"runs/{run_id}/manifest.json: signature does not match (changed after sealing)")
