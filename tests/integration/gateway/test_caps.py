"""Limits with recorded results: the gateway's 413, the stored-evidence caps."""

from __future__ import annotations

from claimgrid import caps
from claimgrid.caps import cap_run_evidence
from claimgrid.trace import parse_trace

from tests import loopback_http
from tests.test_gateway_support import register, shared_gateway


def _post(token, **kw):
    return loopback_http.post(
        f"{shared_gateway().url}/chat/completions",
        timeout=60,
        headers={"Authorization": f"Bearer {token}", **kw.pop("headers", {})},
        **kw,
    )


def test_an_over_size_request_body_is_413_and_recorded_not_stored(tasks):
    token, _ = register(tasks["write-status"])
    big = "x" * (caps.MAX_REQUEST_BYTES + 1)
    r = _post(token, json={"model": "diligent", "messages": [{"role": "user", "content": big}]})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"

    def chunks():  # no Content-Length: the gateway stops reading at the cap
        for _ in range(caps.MAX_REQUEST_BYTES // (1 << 16) + 2):
            yield b"x" * (1 << 16)

    assert _post(token, content=chunks()).status_code == 413
    ok = _post(token, json={"model": "diligent", "messages": [{"role": "user", "content": "hi"}]})
    assert ok.status_code == 200  # the run goes on; the refusals counted as calls
    events, raw = shared_gateway().finish(token)
    assert [(e["call_index"], e["status"]) for e in events] == [(0, 413), (1, 413), (2, 200)]
    assert raw[0]["request"] is None and raw[1]["request"] is None
    assert "MAX_REQUEST_BYTES" in events[0]["error"]


def test_stored_evidence_caps_keep_the_trace_and_every_tool_event():
    trace = "trace:\n  delegation_id: r\n  agent: builder\n  tool_uses_count: 1\n  status: DONE\n"
    text = "blah " * 100_000 + "\n" + trace
    runtime = [{"source": "runtime", "kind": "message", "text": "y" * 100_000}] * (caps.MAX_RUNTIME_EVENTS + 5)
    tools = [{"source": "tools", "kind": "tool_call", "result": "z" * 50_000}] * 3000
    final, rt, tl, gw, limits = cap_run_evidence(text, runtime, tools, [])
    assert len(final) < caps.MAX_FINAL_TEXT_CHARS + 200 and parse_trace(final)[0] == parse_trace(text)[0]
    assert len(rt) == caps.MAX_RUNTIME_EVENTS and limits["runtime_events_dropped"] == 5
    assert len(tl) == 3000 and all(len(e["result"]) < caps.MAX_EVENT_STRING_CHARS + 200 for e in tl)
    assert limits["final_text_cut"] and limits["tools_strings_cut"] == 3000
    stored = len(final) + sum(len(e["text"]) for e in rt) + sum(len(e["result"]) for e in tl)
    assert stored < 100 << 20
