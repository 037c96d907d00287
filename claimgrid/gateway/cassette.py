"""The cassette: a run's ``gateway.jsonl`` as a complete, content-addressed record.

Every raw exchange line holds the request body, the response body and headers the agent
received, the status, ``run_id``, ``call_index`` and ``request_sha256``: the SHA-256 of
the request in canonical JSON (sorted keys, no spaces, UTF-8), or of the raw bytes when
the body was not JSON. ``grid.py replay`` serves the recorded responses in call order and
compares the hash of each new request with the recorded one.

Before hashing, the one thing in a request that no framework controls and that differs
on every execution is masked: a test runner's elapsed time inside a tool result
(``Ran 3 tests in 0.001s``, ``2 passed in 0.12s``) becomes ``in <t>s``. A tool result is
a ``tool`` message, or a ``user`` message after the first assistant message: a framework
that keeps its history as text sends its tool results so (smolagents' "Observation:").
The messages before the model's first answer (the prompt) are hashed as they are. The
stored body keeps the real text; only the hash ignores it.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from claimgrid.anybytes import json_bytes
from claimgrid.store import LedgerFolder

# A test runner's elapsed time ("in 0.001s", "in 1.23 seconds"): measured, never the framework's choice.
ELAPSED = re.compile(r"\bin \d+(?:\.\d+)?(?:s| seconds)\b")


def canonical(body) -> bytes:
    # json_bytes: the same bytes as json.dumps for any body without a lone surrogate, and a
    # body with one (a non-UTF-8 file name in a tool result) still has a digest.
    return json_bytes(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _masked(body):
    """``body`` with the elapsed times in tool results masked (the hash's input only)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return body
    out = []
    answered = False  # the model has answered once: a later user message may be a tool result
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        answered = answered or role == "assistant"
        if role == "tool" or (role == "user" and answered):
            content = m.get("content")
            if isinstance(content, str):
                m = {**m, "content": ELAPSED.sub("in <t>s", content)}
            elif isinstance(content, list):  # content parts
                m = {
                    **m,
                    "content": [
                        {**p, "text": ELAPSED.sub("in <t>s", p["text"])}
                        if isinstance(p, dict) and isinstance(p.get("text"), str)
                        else p
                        for p in content
                    ],
                }
        out.append(m)
    return {**body, "messages": out}


def request_sha256(body, raw: bytes | None = None) -> str:
    """The request's content address: canonical JSON of ``body`` (elapsed times in tool
    results masked), else the raw bytes."""
    data = canonical(_masked(body)) if body is not None else (raw or b"")
    return hashlib.sha256(data).hexdigest()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_cassette(ledger: LedgerFolder, run_id: str) -> list[dict]:
    """Run ``run_id``'s recorded exchanges in ``ledger``, by call index, each with its
    ``request_sha256`` and its gateway exchange event (``event``, read through the store's
    reader). Hashes missing from older ledgers are computed from the stored request body."""
    raw = sorted(read_jsonl(ledger.run_dir(run_id) / "gateway.jsonl"), key=lambda r: r["call_index"])
    events = {
        e["call_index"]: e
        for e in ledger.event_dicts(run_id)
        if e.get("source") == "gateway" and e.get("kind") == "exchange"
    }
    out = []
    for r in raw:
        r = dict(r)
        r.setdefault("request_sha256", request_sha256(r.get("request")))
        r["event"] = events.get(r["call_index"])
        out.append(r)
    return out
