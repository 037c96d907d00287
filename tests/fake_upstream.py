"""A loopback OpenAI-compatible "provider" for the real-model tests (no tests here).

``FakeUpstream`` is an HTTP server on 127.0.0.1 that stands in for a hosted API reached
as ``openai/<name>`` (OPENAI_API_BASE / OPENAI_API_KEY in the environment, as for the
real thing). Good answers come from a claimgrid Gateway behind it, serving a reference
policy, so an agent really completes its task; a fault plan makes it misbehave like a
provider: 429 with ``Retry-After``, 500/503, or a connection reset (RST) before any
response byte.

The plan is a function ``plan(run_key, n) -> fault | None`` called for the ``n``-th
request (from 0) of each run. ``run_key`` is the ``delegation_id`` the harness prompt
asks the agent to report (the run id), found in the request's messages, or ``""``.
Faults: ``("status", code, headers[, (message, code)])``, ``("reset",)``, ``("slow", seconds)`` (a good
answer, late) or ``("generate", tokens_per_s)``: a small model that generates without
stopping, at that speed: it answers only when the request's ``max_tokens`` (or
``max_completion_tokens``) is reached, with that many tokens of text, ``finish_reason:
length`` and the usage, and never (until the server stops) when the request sets no bound.
Every request's body is kept in ``bodies`` as ``(run_key, n, body)``.

A framework that ends only on a call of its final-answer tool (venvs.toml ``final_answer``)
gets its final text as that call, as from the reference models: ``final_answers`` is the
list of those protocols, ``(tool, argument)``, read from venvs.toml by the caller. The
provider knows runs only by their key, never by framework, so it applies a protocol to a
run whose request offers that tool with that argument, as a real model reads the tools it
is offered. Every request is logged in
``hits`` as ``(run_key, n, fault_or_None)``; ``peak_in_flight`` is the most requests it
answered at once.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from claimgrid.gateway import Gateway

RUN_KEY = re.compile(r"delegation_id:\s*(\S+)")


def run_key(body: dict) -> str:
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):  # content parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        found = RUN_KEY.search(content or "")
        if found and "<" not in found.group(1):
            return found.group(1)
    return ""


def _json(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def offered_protocol(raw: bytes, protocols: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The first of ``protocols`` whose tool the request offers with that argument (None: none)."""
    try:
        tools = json.loads(raw).get("tools") or []
    except (ValueError, AttributeError):
        return None
    offered = {}
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict):
            params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
            offered[fn.get("name")] = set(params.get("properties") or {})
    return next((p for p in protocols if p[1] in offered.get(p[0], ())), None)


class FakeUpstream:
    """``with FakeUpstream(inner_token, plan) as up: up.url ...`` (inner gateway supplied)."""

    def __init__(self, inner: Gateway, inner_token, plan=None, final_answers: Iterable[tuple[str, str]] = ()):
        # ``inner_token``: one registered token for every request, or a callable returning a
        # fresh RunScript: each run (by its key) then gets its own inner registration, as the
        # inner gateway keeps each run's progress by its token (one token per run, like a grid),
        # in the final-answer protocol its request offers (``final_answers``).
        self.inner, self.inner_token = inner, inner_token
        self.final_answers = tuple(final_answers)
        self._tokens: dict[str, str] = {}
        self.plan = plan or (lambda key, n: None)
        self.hits: list[tuple[str, int, tuple | None]] = []
        self.bodies: list[tuple[str, int, dict]] = []
        self._stopped = threading.Event()
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self.in_flight = self.peak_in_flight = 0  # requests being answered now / at most at once
        self._client = httpx.Client(timeout=60)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: bytes, headers: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._send(200, b'{"object": "list", "data": []}')

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                key = run_key(body)
                with owner._lock:
                    owner.in_flight += 1
                    owner.peak_in_flight = max(owner.peak_in_flight, owner.in_flight)
                try:
                    self._answer(raw, key)
                finally:
                    with owner._lock:
                        owner.in_flight -= 1

            def _generate(self, body: dict, rate: float):
                bound = body.get("max_tokens") or body.get("max_completion_tokens")
                if not isinstance(bound, int):
                    owner._stopped.wait(600)  # no bound: it never stops (until the server does)
                    self.close_connection = True
                    return
                if owner._stopped.wait(bound / rate):
                    return
                text = " ".join(["token"] * bound)
                prompt = len(json.dumps(body.get("messages") or [])) // 4
                answer = {
                    "id": "gen-1",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model") or "fake",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                    ],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": bound, "total_tokens": prompt + bound},
                }
                try:
                    self._send(200, json.dumps(answer).encode())
                except OSError:  # the client gave up first
                    pass

            def _answer(self, raw: bytes, key: str):
                with owner._lock:
                    n = owner._counts.get(key, 0)
                    owner._counts[key] = n + 1
                    fault = owner.plan(key, n)
                    owner.hits.append((key, n, fault))
                    owner.bodies.append((key, n, _json(raw)))
                if fault and fault[0] == "reset":
                    # SO_LINGER 0: close() sends RST, the client sees "connection reset".
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault and fault[0] == "slow":
                    time.sleep(fault[1])
                if fault and fault[0] == "generate":
                    self._generate(_json(raw), fault[1])
                    return
                if fault and fault[0] == "status":
                    code, headers = fault[1], (fault[2] if len(fault) > 2 else {})
                    # an optional 4th item: the provider's own error (message, code)
                    message, err_code = fault[3] if len(fault) > 3 else (f"fake upstream fault {code}", str(code))
                    err = {
                        "error": {
                            "message": message,
                            "type": "server_error" if code >= 500 else "invalid_request_error",
                            "param": None,
                            "code": err_code,
                        }
                    }
                    self._send(code, json.dumps(err).encode(), headers)
                    return
                token = owner.token_for(key, offered_protocol(raw, owner.final_answers))
                r = owner._client.post(
                    f"{owner.inner.url}/chat/completions",
                    content=raw,
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                )
                self._send(r.status_code, r.content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def token_for(self, key: str, final_answer: tuple[str, str] | None = None) -> str:
        """The inner token for run ``key``; a new run's script takes ``final_answer`` (the
        protocol its first good request offers; None: plain text ends the run)."""
        if isinstance(self.inner_token, str):
            return self.inner_token
        with self._lock:
            if key not in self._tokens:
                self._tokens[key] = f"inner-{len(self._tokens)}"
                self.inner.register(self._tokens[key], self.inner_token().with_final_answer(final_answer))
            return self._tokens[key]

    def start(self) -> FakeUpstream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def reset(self, plan=None) -> None:
        """Forget the counts and hits; serve ``plan`` from now on (None: no faults)."""
        with self._lock:
            self.plan = plan or (lambda key, n: None)
            self._counts.clear()
            self.hits.clear()
            self.bodies.clear()

    def requests_for(self, key: str) -> list[tuple | None]:
        """The faults served to run ``key``'s requests, in order (None = a good answer)."""
        with self._lock:
            return [f for k, _, f in self.hits if k == key]
