"""The gateway with hostile content and hostile clients (real server, raw HTTP):

* any text in a request (lone surrogates, NUL, control characters) is answered and recorded,
  and a model's answer holding a lone surrogate reaches the client as that same string;
* a response with more tool calls than caps.MAX_TOOL_CALLS_PER_RESPONSE is cut, and recorded;
* a connection that sends nothing, or stops mid-request, is closed at the read timeout;
* requests of one run over caps.GATEWAY_MAX_REQUESTS_PER_RUN are refused (429), recorded.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from urllib.parse import urlparse

import httpx
from hypothesis import given
from hypothesis import strategies as st

from claimgrid import caps
from claimgrid.reference.policies import ToolCall, Turn
from claimgrid.reference.registry import ReferenceModel, get, register

from tests import loopback_http
from tests.test_gateway_support import TOOLS, script, shared_gateway

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=80)
SURROGATE_ANSWER = "done \ud800 \udcff"


def _test_double(name, policy):
    if get(name) is None:  # registered like any policy, once per session
        register(ReferenceModel(name, policy, "test double", origin="tests"))
    return name


def _token(tasks, model="diligent"):
    token = f"tok-{uuid.uuid4().hex}"
    shared_gateway().register(token, script(tasks["fix-float-add"], model=model))
    return token


def _post(token, body: dict) -> httpx.Response:
    # The body as a client sends it: ASCII JSON (escapes for surrogates), never re-encoded here.
    return loopback_http.post(
        f"{shared_gateway().url}/chat/completions",
        content=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )


@given(text=ANY_TEXT)
def test_any_request_text_is_answered_and_recorded(tasks, text):
    token = _token(tasks)
    messages = [{"role": "user", "content": text}, {"role": "tool", "tool_call_id": "c", "content": text}]
    r = _post(token, {"model": "m", "messages": messages, "tools": TOOLS})
    events, raw = shared_gateway().finish(token)
    assert r.status_code == 200, r.text
    assert [e["status"] for e in events] == [200]
    assert raw[0]["request"]["messages"][0]["content"] == text


def test_a_lone_surrogate_in_an_answer_reaches_the_client_unchanged(tasks):
    model = _test_double("test-surrogate-answer", lambda s, m: Turn(content=SURROGATE_ANSWER))
    token = _token(tasks, model)
    r = _post(token, {"model": "m", "messages": [{"role": "user", "content": "go"}]})
    events, _ = shared_gateway().finish(token)
    assert r.status_code == 200
    assert json.loads(r.content)["choices"][0]["message"]["content"] == SURROGATE_ANSWER
    assert events[0]["content"] == SURROGATE_ANSWER


def test_tool_calls_past_the_per_response_cap_are_cut_and_recorded(tasks):
    many = tuple(ToolCall(f"c{i}", "list_dir", "{}") for i in range(caps.MAX_TOOL_CALLS_PER_RESPONSE + 36))
    model = _test_double("test-many-calls", lambda s, m: Turn(tool_calls=many))
    token = _token(tasks, model)
    r = _post(token, {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": TOOLS})
    events, _ = shared_gateway().finish(token)
    assert len(r.json()["choices"][0]["message"]["tool_calls"]) == caps.MAX_TOOL_CALLS_PER_RESPONSE
    assert events[0]["tool_calls_cut"] == 36


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes the connection (whatever it sent first) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def test_silent_and_stalled_connections_are_closed_at_the_read_timeout(tasks, monkeypatch):
    monkeypatch.setattr(caps, "GATEWAY_READ_TIMEOUT_S", 0.5)
    token = _token(tasks)
    url = urlparse(shared_gateway().url)
    silent = socket.create_connection((url.hostname, url.port))
    mid_headers = socket.create_connection((url.hostname, url.port))
    mid_headers.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    mid_body = socket.create_connection((url.hostname, url.port))
    mid_body.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + token.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    t0 = time.monotonic()
    assert _closed_within(silent, 10) and _closed_within(mid_headers, 10) and _closed_within(mid_body, 10)
    assert time.monotonic() - t0 < 10
    for sock in (silent, mid_headers, mid_body):
        sock.close()
    time.sleep(0.2)  # the handler records the disconnect as the run's exchange
    events, _ = shared_gateway().finish(token)
    assert [e["status"] for e in events] in ([400], [500])  # a recorded refusal, not a hang


def test_requests_over_the_per_run_cap_are_refused_and_recorded(tasks, monkeypatch):
    token = _token(tasks)
    monkeypatch.setattr(caps, "GATEWAY_MAX_REQUESTS_PER_RUN", 0)
    r = _post(token, {"model": "m", "messages": [{"role": "user", "content": "go"}]})
    monkeypatch.setattr(caps, "GATEWAY_MAX_REQUESTS_PER_RUN", 16)
    ok = _post(token, {"model": "m", "messages": [{"role": "user", "content": "go"}]})
    events, _ = shared_gateway().finish(token)
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_requests_in_flight"
    assert ok.status_code == 200
    assert [e["status"] for e in events] == [429, 200]


def test_a_slow_answer_to_a_connection_close_request_is_not_cut_at_the_read_timeout(tasks, monkeypatch):
    """The read timeout is for a request not yet received: a whole request whose answer takes
    longer (a slow model) is answered, also when the client sent ``Connection: close``, as
    urllib does (h11 then holds the client in MUST_CLOSE, not DONE)."""
    from claimgrid.reference.gateway_faults import gateway_faults
    from claimgrid.reference.script import CallLimits, RunScript

    from tests.test_gateway_support import conditions

    slow = next(name for name, f in gateway_faults().items() if f.kind == "slow")
    monkeypatch.setattr(caps, "GATEWAY_READ_TIMEOUT_S", 0.5)
    cc, sc = conditions()
    run = RunScript.for_cell(
        f"r-{uuid.uuid4().hex[:8]}",
        tasks["fix-float-add"],
        cc["clean"],
        sc["none"],
        slow,
        "reader",
        "builder",
        limits=CallLimits(max_model_calls=4, model_call_timeout_s=0.2),
    )
    token = f"tok-{uuid.uuid4().hex}"
    shared_gateway().register(token, run)
    fault = gateway_faults()[slow]
    for _ in range(fault.at_call):  # the calls before the slow one
        assert _post(token, {"model": "m", "messages": [{"role": "user", "content": "go"}]}).status_code == 200
    url = urlparse(shared_gateway().url)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}]}).encode()
    sock = socket.create_connection((url.hostname, url.port))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
        + token.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    sock.settimeout(20)
    data = b""
    t0 = time.monotonic()
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    events, _ = shared_gateway().finish(token)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert time.monotonic() - t0 > 0.5  # the answer came after the read timeout
    assert [e["status"] for e in events] == [200] * (fault.at_call + 1)
