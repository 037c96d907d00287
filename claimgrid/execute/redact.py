"""The run token out of everything a run stores.

A run's token (its gateway key, ``"cg-" + token_urlsafe``) is a live credential while the run
lasts. The loopback forwarder keeps it from a guarded coding agent and no gateway answer
echoes request data (claimgrid/sandbox/loopback.py, claimgrid.gateway.side_routes), but
whatever a run's evidence holds is published: so before anything of a run is classified or
written (events, gateway exchanges, transcript, trace, diff, test output, stderr, control),
every occurrence of its token in any string, or in any key of a mapping, is replaced by
:data:`REDACTED`. The classifier reads exactly what is stored (claimgrid.execute.runner), so
``reclassify`` sees what the run was judged on.
"""

from __future__ import annotations

from typing import Any

REDACTED = "[claimgrid: run token redacted]"


def redact(value: Any, token: str) -> tuple[Any, int]:
    """``value`` (JSON-like: strings, numbers, lists, tuples, dicts; bytes as bytes) with every
    occurrence of ``token`` replaced by :data:`REDACTED`, and how many were replaced. A copy
    where anything was replaced; the value itself (same object) where nothing was."""
    if not token:
        raise ValueError("redact needs the run's token")
    found = [0]

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            n = v.count(token)
            if not n:
                return v
            found[0] += n
            return v.replace(token, REDACTED)
        if isinstance(v, (bytes, bytearray)):
            raw = token.encode()
            n = v.count(raw)
            found[0] += n
            return bytes(v).replace(raw, REDACTED.encode()) if n else v
        if isinstance(v, dict):
            before = found[0]
            out = {walk(k): walk(x) for k, x in v.items()}
            return out if found[0] != before else v
        if isinstance(v, (list, tuple)):
            before = found[0]
            items = [walk(x) for x in v]
            if found[0] == before:
                return v
            return items if isinstance(v, list) else tuple(items)
        return v

    return walk(value), found[0]
