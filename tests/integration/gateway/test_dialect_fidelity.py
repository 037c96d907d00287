"""Dialect fidelity through the real gateway (claimgrid.gateway.native): a Claude Code-shaped
Anthropic Messages exchange and a Codex-shaped OpenAI Responses exchange
(tests/fixtures/dialects/*.json, written from the public API references' shapes) round-trip
with every field kept: the request as a loopback fake provider receives it is the client's
(only ``model`` is the run's assigned model and ``stream`` is not asked of the provider), and
the answer the client gets, as JSON and as a stream, is the provider's (only ``model``
carries the client's name). Both are recorded as they went."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from claimgrid.gateway import Gateway

from tests import loopback_http
from tests.test_gateway_support import script

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dialects"
CASES = {
    "anthropic": ("anthropic_messages.json", "/v1/messages", "ANTHROPIC_API_BASE", "ANTHROPIC_API_KEY"),
    "responses": ("openai_responses.json", "/v1/responses", "OPENAI_API_BASE", "OPENAI_API_KEY"),
}
HARNESS_KEY = "harness-provider-key"


class FakeProvider:
    """A loopback provider: records each request (path, headers, body) and answers ``answer``."""

    def __init__(self, answer: dict):
        self.answer, self.seen = answer, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                fake.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(body)))
                data = json.dumps(fake.answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def gateway():
    gw = Gateway()
    gw.start()
    yield gw
    gw.stop()


def _anthropic_from_stream(text: str) -> dict:
    message, blocks, partial = None, {}, {}
    for chunk in text.split("\n\n"):
        data = next((line[6:] for line in chunk.splitlines() if line.startswith("data: ")), None)
        if data is None:
            continue
        event = json.loads(data)
        kind = event["type"]
        if kind == "message_start":
            message = event["message"]
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            message.update(event["delta"])
            message["usage"] = event["usage"]
    for index, raw in partial.items():
        blocks[index]["input"] = json.loads(raw)
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _responses_from_stream(text: str) -> dict:
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    completed = [e["response"] for e in events if e["type"] == "response.completed"]
    assert len(completed) == 1 and done == completed[0]["output"]
    return completed[0]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_captured_exchange_round_trips_with_every_field(gateway, tasks, monkeypatch, case, stream):
    name, path, base_env, key_env = CASES[case]
    fixture = json.loads((FIXTURES / name).read_text())
    provider = FakeProvider(fixture["response"])
    monkeypatch.setenv(base_env, provider.url)
    monkeypatch.setenv(key_env, HARNESS_KEY)
    token = f"tok-{uuid.uuid4().hex}"
    task = next(iter(tasks.values()))
    gateway.register(token, script(task, model=fixture["assigned"]))
    request = {**fixture["request"], "stream": stream}
    auth = {"x-api-key": token} if case == "anthropic" else {"authorization": f"Bearer {token}"}
    try:
        resp = loopback_http.post(
            gateway.url.removesuffix("/v1") + path, json=request, headers={**auth, **fixture["headers"]}, timeout=60
        )
    finally:
        provider.close()
    assert resp.status_code == 200, resp.text

    # The request as the provider got it: the client's, every field, block and header kept.
    assert len(provider.seen) == 1
    _, headers, forwarded = provider.seen[0]
    want = {k: v for k, v in request.items() if k != "stream"} | {"model": fixture["assigned"].split("/", 1)[1]}
    assert forwarded == want
    for header, value in fixture["headers"].items():
        assert headers[header] == value
    assert token not in json.dumps(headers) and HARNESS_KEY in json.dumps(headers)  # the run token stays here

    # The answer as the client got it: the provider's, every field, model named as asked.
    got = (
        resp.json()
        if not stream
        else (_anthropic_from_stream if case == "anthropic" else _responses_from_stream)(resp.text)
    )
    assert got == fixture["response"] | {"model": request["model"]}

    # Recorded as they went, and read for the exchange event.
    events, raw = gateway.finish(token)
    assert raw[0]["upstream_request"] == forwarded and raw[0]["upstream_response"] == fixture["response"]
    assert raw[0]["dialect_request"] == request
    assert events[0]["status"] == 200 and [c["name"] for c in events[0]["tool_calls"]] in (["Glob"], ["shell"])
    sent = events[0]["tool_results"]
    assert sent and ("File does not exist." in sent[0] or "No such file" in sent[0])
