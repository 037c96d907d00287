"""The gateway's limits on a real model's calls, without the internet: the output-token cap
reaches the forwarded request in every dialect (recorded in the exchange event with what the
client asked for), a client's own lower bound is kept, reference calls are never capped, and
a provider that does not answer by the per-call deadline is ended there and recorded.

The "real" provider is a second gateway on 127.0.0.1 reached as ``openai/gpt-4o-mini``
(OPENAI_API_BASE / OPENAI_API_KEY), as in test_gateway_real_models.py: its raw log is the
request the provider received.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from claimgrid.gateway import Gateway

from tests import loopback_http
from tests.test_gateway_support import script, shared_gateway

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def upstream(monkeypatch, tasks):
    gw2 = Gateway()
    url = gw2.start()
    gw2.register("upstream-key", script(tasks["fix-float-add"], model="diligent", max_model_calls=100))
    monkeypatch.setenv("OPENAI_API_BASE", url)
    monkeypatch.setenv("OPENAI_API_KEY", "upstream-key")
    yield gw2
    gw2.stop()


def _register(task, model=MODEL, **limits):
    s = dataclasses.replace(script(task, model=model), **limits)
    token = f"tok-{uuid.uuid4().hex}"
    shared_gateway().register(token, s)
    return token


# (dialect path, headers for the token, a body asking for `asked` output tokens (None: no bound))
def _request(dialect: str, token: str, asked: int | None):
    msg = [{"role": "user", "content": "go"}]
    if dialect == "anthropic":
        return "/messages", {"x-api-key": token}, {"model": "m", "max_tokens": asked, "messages": msg}
    auth = {"Authorization": f"Bearer {token}"}
    if dialect == "responses":
        body = {"model": "m", "input": "go", **({"max_output_tokens": asked} if asked else {})}
        return "/responses", auth, body
    return "/chat/completions", auth, {"model": "m", "messages": msg, **({"max_tokens": asked} if asked else {})}


@pytest.mark.parametrize(
    "dialect,asked,field",
    [
        ("chat", None, "max_tokens"),
        ("chat", 5000, "max_tokens"),
        ("anthropic", 4096, "max_tokens"),
        ("responses", 3000, "max_output_tokens"),
        ("responses", None, "max_output_tokens"),
    ],
)
def test_the_output_cap_reaches_the_forwarded_request_in_every_dialect(tasks, upstream, dialect, asked, field):
    token = _register(tasks["fix-float-add"], max_output_tokens=77)
    path, headers, body = _request(dialect, token, asked)
    r = loopback_http.post(shared_gateway().url + path, json=body, headers=headers, timeout=30)
    events, raw = shared_gateway().finish(token)
    assert r.status_code == 200, r.text
    _, upstream_raw = upstream.finish("upstream-key")
    assert [line["request"]["max_tokens"] for line in upstream_raw] == [77]  # what the provider received
    assert events[0]["output_cap"] == {"cap": 77, "requested": asked, "field": field, "applied": True}
    # The gateway's raw log keeps the request as the client sent it.
    sent = raw[0].get("dialect_request") or raw[0]["request"]
    assert sent.get(field) == asked


def test_a_lower_bound_of_the_client_is_kept_and_reference_calls_are_not_capped(tasks, upstream):
    token = _register(tasks["fix-float-add"], max_output_tokens=77)
    path, headers, body = _request("chat", token, 12)
    assert loopback_http.post(shared_gateway().url + path, json=body, headers=headers, timeout=30).status_code == 200
    events, _ = shared_gateway().finish(token)
    _, upstream_raw = upstream.finish("upstream-key")
    assert upstream_raw[0]["request"]["max_tokens"] == 12
    assert events[0]["output_cap"]["applied"] is False and "limit" not in events[0]

    token = _register(tasks["fix-float-add"], model="diligent", max_output_tokens=77)
    path, headers, body = _request("chat", token, None)
    assert loopback_http.post(shared_gateway().url + path, json=body, headers=headers, timeout=30).status_code == 200
    events, _ = shared_gateway().finish(token)
    assert "output_cap" not in events[0] and "limit" not in events[0]


class _Stalling:
    """A provider that never answers: every request waits until the server stops."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stop = self.stop_event = threading.Event()

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stop.wait(60)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_call_past_the_deadline_is_ended_by_the_gateway_and_recorded(tasks, monkeypatch):
    stalling = _Stalling()
    monkeypatch.setenv("OPENAI_API_BASE", stalling.url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    try:
        token = _register(tasks["fix-float-add"], model_call_timeout_s=1.5)
        path, headers, body = _request("chat", token, None)
        t0 = time.monotonic()
        r = loopback_http.post(shared_gateway().url + path, json=body, headers=headers, timeout=30)
        took = time.monotonic() - t0
        events, _ = shared_gateway().finish(token)
    finally:
        stalling.close()
    assert r.status_code == 504 and "per-call deadline of 1.5 s" in r.text
    assert 1.5 <= took < 10
    assert events[0]["limit"] == {"kind": "call_deadline", "value": 1.5}
    assert events[0]["status"] == 504 and events[0]["error"].startswith("no answer within")
