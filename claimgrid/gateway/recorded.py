"""The replay provider: serve a published run's recorded exchanges, in call order, offline.

``Gateway(replay=ReplaySource(ledger_dir))`` answers call ``i`` of run ``r`` with exactly
what the recording answered call ``i`` of ``r`` (status, body, headers; a JSON or an SSE
response as the new request asks), whatever the request says: no model, no key, no
network. Each replayed exchange event repeats the recorded event's facts (served and
reported model, swap, cost, provider attempts, the limit it hit and the output cap set on it) and adds ``replay``:
``{"request_sha256", "recorded_sha256", "match"}``. A call beyond the recording gets
``503`` with code ``replay_exhausted``.

A recording holds the internal chat request and answer of every call, whatever dialect its
client spoke (claimgrid.gateway.dialects): a call in another dialect is translated to the
internal request (whose hash is compared) and the recorded answer translated back into it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from starlette.responses import StreamingResponse

from claimgrid.gateway.cassette import load_cassette, request_sha256
from claimgrid.gateway.dialects import Dialect, DialectError
from claimgrid.gateway.dialects.chat import DIALECT as CHAT
from claimgrid.gateway.exchanges import Answer, Call, Routing, exchange_event, openai_error
from claimgrid.gateway.request import parse_object
from claimgrid.gateway.safejson import SafeJSONResponse
from claimgrid.store.reader import LedgerFolder


class ReplaySource:
    def __init__(self, ledger_dir: Path):
        self.folder = Path(ledger_dir)
        # The gateway knows a run by its delegation id (blinding); the ledger by run id.
        self.run_ids: dict[str, str] = {}
        for rec in LedgerFolder(self.folder).runs():  # the store's reader (absent: no runs)
            delegation = rec.facts.delegation_id if rec.facts is not None else None
            if delegation:
                self.run_ids[delegation] = rec.run_id

    def cassette(self, script_run_id: str) -> list[dict]:
        return load_cassette(LedgerFolder(self.folder), self.run_ids.get(script_run_id, script_run_id))

    async def serve(self, request, state, index: int, t: float, dialect: Dialect = CHAT):
        t0 = time.perf_counter()
        raw = await request.body()
        given: dict | None = None
        if dialect.internal:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            body = body if isinstance(body, dict) else None
        else:  # the internal request is what was recorded and hashed
            given = parse_object(raw)[0]
            try:
                body = dialect.to_chat(given) if given is not None else None
            except DialectError:
                body = None
        sha = request_sha256(body, raw)
        stream = bool(body and body.get("stream"))
        messages = body.get("messages") if body else None
        cassette = state.cassette or []
        script = state.script
        if index < len(cassette):
            rec = cassette[index]
            status, response = rec["status"], rec["response"]
            headers = dict(rec.get("response_headers") or {})
            ev = rec.get("event") or {}
            recorded = rec["request_sha256"]
        else:
            status, headers, ev, recorded = 503, {}, {}, None
            response = openai_error(
                503, f"replay: the recording of run {script.run_id} has no call {index}", "replay_exhausted"
            )
        ok = status == 200 and isinstance(response, dict) and response.get("choices")
        event = exchange_event(
            Call(index=index, t=t, stream=stream, requested=body.get("model") if body else None, messages=messages),
            Routing(
                assigned=ev.get("assigned_model", script.model),
                served=ev.get("served_model"),
                reported=ev.get("reported_model"),
                swap=ev.get("swap", "none"),
            ),
            Answer(
                status=status,
                error=ev.get("error") if index < len(cassette) else response["error"]["message"],
                latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                response=response if ok else None,
                cost_usd=ev.get("cost_usd"),
            ),
        )
        event["provider"] = ev.get("provider")
        for key in ("limit", "output_cap"):  # the limit the recorded call hit, as recorded
            if ev.get(key) is not None:
                event[key] = ev[key]
        event["dialect"] = dialect.name
        event["replay"] = {"request_sha256": sha, "recorded_sha256": recorded, "match": sha == recorded}
        if dialect.internal:
            reply = response
        elif ok:
            reply = dialect.from_chat(response, given or {})
        else:
            failure = response.get("error") if isinstance(response, dict) else None
            failure = failure if isinstance(failure, dict) else {}
            reply = dialect.error(status, failure.get("message"), failure.get("code"))
        line = {
            "call_index": index,
            "t": t,
            "status": status,
            "stream": stream,
            "request": body,
            "response": response,
            "response_headers": headers,
            "run_id": script.run_id,
            "request_sha256": sha,
            "provider": ev.get("provider"),
            "replayed": True,
            "dialect": dialect.name,
        }
        if not dialect.internal:
            line["dialect_request"], line["dialect_response"] = given, reply
        state.record(event, line)
        if not ok:
            return SafeJSONResponse(reply, status_code=status, headers=headers)
        if stream:
            assert body is not None  # stream is read from a parsed body
            return StreamingResponse(
                dialect.stream(response, reply, given if given is not None else body),
                media_type="text/event-stream",
                headers=headers,
            )
        return SafeJSONResponse(reply, headers=headers)
