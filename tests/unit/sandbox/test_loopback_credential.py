"""The loopback forwarder's credential (claimgrid/sandbox/loopback.py): the token goes only
into the value of the credential header that carried the placeholder alone, never into the
request line, another header or a body, and a header block the gateway could frame otherwise
is not passed on. Through the real pump, over socket pairs."""

from __future__ import annotations

import socket
import threading

import pytest

from claimgrid.launch.confine import CREDENTIAL_PLACEHOLDER
from claimgrid.sandbox.loopback import _inject_pump, credential_header

P = CREDENTIAL_PLACEHOLDER.encode()
TOKEN = b"cg-the-run-token-only-the-forwarder-holds"


def _through(*requests: bytes) -> bytes:
    """What the gateway's side receives when the agent sends ``requests`` and closes."""
    agent, inside = socket.socketpair()
    outside, gateway = socket.socketpair()
    pump = threading.Thread(target=_inject_pump, args=(inside, outside, P, TOKEN))
    pump.start()
    agent.sendall(b"".join(requests))
    agent.shutdown(socket.SHUT_WR)
    got = b""
    while data := gateway.recv(1 << 16):
        got += data
    pump.join(5)
    for s in (agent, inside, outside, gateway):
        s.close()
    return got


def test_only_the_credential_headers_value_gets_the_token():
    body = b'{"model": "' + P + b'"}'
    got = _through(
        b"GET /v1/models/" + P + b" HTTP/1.1\r\nHost: x\r\nx-api-key: " + P + b"\r\nX-Echo: " + P + b"\r\n\r\n",
        b"POST /v1/chat/completions?k=" + P + b" HTTP/1.1\r\nauthorization: bearer " + P + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nanthropic-beta: " + P + b"\r\n\r\n" + body,
        b"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + P + b"\r\n\r\n",  # after the body: still a request
    )
    heads = got.split(b"\r\n\r\n")
    assert heads[0].split(b"\r\n") == [
        b"GET /v1/models/" + P + b" HTTP/1.1",
        b"Host: x",
        b"x-api-key: " + TOKEN,
        b"X-Echo: " + P,
    ]
    assert heads[1].split(b"\r\n")[0] == b"POST /v1/chat/completions?k=" + P + b" HTTP/1.1"
    assert b"authorization: bearer " + TOKEN in heads[1] and b"anthropic-beta: " + P in heads[1]
    assert heads[2] == body + b"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + TOKEN
    assert got.count(TOKEN) == 3


@pytest.mark.parametrize(
    "line",
    [
        b"x-api-key: " + P + b" " + P,
        b"x-api-key: prefix" + P,
        b"Authorization: Basic " + P,
        b"Authorization: " + P,
        b"Authorization: Bearer " + P + b"x",
        b"Authorization: Bearer  " + P,
        b"Proxy-Authorization: Bearer " + P,
        b"x-api-key-2: " + P,
        b"X-Forwarded: x-api-key: " + P,
    ],
)
def test_a_placeholder_anywhere_else_stays_the_placeholder(line):
    assert credential_header(line, P, TOKEN) == line
    assert TOKEN not in _through(b"GET / HTTP/1.1\r\n" + line + b"\r\n\r\n")


@pytest.mark.parametrize(
    "head",
    [
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked",
        b"POST / HTTP/1.1\r\nContent-Length: +5",
        b"POST / HTTP/1.1\nContent-Length: 40\r\nHost: x",
        b"POST / HTTP/1.1\r\nHost: x\r\n folded: y",
        b"POST / HTTP/1.1\r\nContent-Length : 5",
        b"POST / HTTP/1.1\r\nno colon here",
    ],
)
def test_a_header_block_the_gateway_could_frame_otherwise_is_not_passed_on(head):
    """Else a body this forwarder passes as bytes could be a header block at the gateway (or
    the reverse), and the token would land in what the gateway reads as a body."""
    smuggled = b"GET /v1/models HTTP/1.1\r\nx-api-key: " + P + b"\r\n\r\n"
    assert _through(head + b"\r\nx-api-key: " + P + b"\r\n\r\n" + smuggled) == b""
