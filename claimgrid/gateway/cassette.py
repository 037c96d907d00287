"""The cassette: a run's ``gateway.jsonl`` as a complete, content-addressed record.

Every raw exchange line holds the request body, the response body and headers the agent
received, the status, ``run_id``, ``call_index`` and ``request_sha256``: the SHA-256 of
the request in canonical JSON (sorted keys, no spaces, UTF-8), or of the raw bytes when
the body was not JSON. ``grid.py replay`` serves the recorded responses in call order and
compares the hash of each new request with the recorded one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def canonical(body) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_sha256(body, raw: bytes | None = None) -> str:
    """The request's content address: canonical JSON of ``body``, else the raw bytes."""
    data = canonical(body) if body is not None else (raw or b"")
    return hashlib.sha256(data).hexdigest()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_cassette(run_dir: Path) -> list[dict]:
    """One run's recorded exchanges, by call index, each with its ``request_sha256`` and
    its gateway exchange event (``event``). Hashes missing from older ledgers are computed
    from the stored request body."""
    raw = sorted(read_jsonl(run_dir / "gateway.jsonl"), key=lambda r: r["call_index"])
    events = {e["call_index"]: e for e in read_jsonl(run_dir / "events.jsonl")
              if e.get("source") == "gateway" and e.get("kind") == "exchange"}
    out = []
    for r in raw:
        r = dict(r)
        r.setdefault("request_sha256", request_sha256(r.get("request")))
        r["event"] = events.get(r["call_index"])
        out.append(r)
    return out
