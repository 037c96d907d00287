"""Malformed chat requests are client errors (400), recorded in the run's log; none crashes a handler.

Two ways in: the gateway a grid uses (in-process, to read what it recorded) and
``grid.py gateway`` as a user starts it (a subprocess whose console must show no traceback).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest

from claimgrid.gateway.request import MAX_DEPTH
from claimgrid.inputs.tasks import load_tasks

from tests import loopback_http
from tests.conftest import ROOT
from tests.test_gateway_support import register, shared_gateway

DEEP = 100_000
OK_MESSAGE = {"role": "user", "content": "go"}

# (id, raw body, words the 400 message must hold)
BAD = [
    ("messages-not-objects", json.dumps({"model": "m", "messages": [1, 2, 3]}), "messages[0]"),
    ("deep-json", '{"messages": ' + "[" * DEEP + "]" * DEEP + "}", "nests deeper"),
    (
        "deep-but-parseable",
        json.dumps(
            {
                "model": "m",
                "messages": [OK_MESSAGE],
                "tools": [{"x": json.loads("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))}],
            }
        ),
        "nests deeper",
    ),
    ("body-is-a-list", "[1, 2]", "JSON object"),
    ("not-json", "{messages: oops", "not valid JSON"),
    ("not-utf8", b'{"messages": "\xff"}', "not valid JSON"),
    ("messages-empty", json.dumps({"messages": []}), "'messages'"),
    ("messages-a-string", json.dumps({"messages": "hello"}), "'messages'"),
    ("role-missing", json.dumps({"messages": [{"content": "hi"}]}), "messages[0].role"),
    ("content-a-number", json.dumps({"messages": [{"role": "user", "content": 5}]}), "messages[0].content"),
    (
        "content-part-text-not-string",
        json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}),
        "content[0]",
    ),
    (
        "tool-calls-not-list",
        json.dumps({"messages": [OK_MESSAGE, {"role": "assistant", "tool_calls": 3}]}),
        "messages[1].tool_calls",
    ),
    (
        "tool-call-without-function",
        json.dumps({"messages": [OK_MESSAGE, {"role": "assistant", "tool_calls": [{"id": "x"}]}]}),
        "tool_calls[0]",
    ),
    ("model-a-number", json.dumps({"model": 5, "messages": [OK_MESSAGE]}), "'model'"),
    ("stream-a-string", json.dumps({"model": "m", "stream": "yes", "messages": [OK_MESSAGE]}), "'stream'"),
    (
        "stream-options-a-list",
        json.dumps({"model": "m", "stream": True, "stream_options": [], "messages": [OK_MESSAGE]}),
        "stream_options",
    ),
    ("tools-not-list", json.dumps({"model": "m", "tools": {"a": 1}, "messages": [OK_MESSAGE]}), "'tools'"),
    ("max-tokens-a-string", json.dumps({"model": "m", "max_tokens": "9", "messages": [OK_MESSAGE]}), "max_tokens"),
    ("temperature-a-string", json.dumps({"model": "m", "temperature": "hot", "messages": [OK_MESSAGE]}), "temperature"),
]


def _post(url: str, token: str, body) -> httpx.Response:
    content = body if isinstance(body, bytes) else body.encode()
    return loopback_http.post(
        f"{url}/chat/completions",
        content=content,
        timeout=60,
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )


def _assert_400(resp: httpx.Response, words: str) -> str:
    assert resp.status_code == 400, (resp.status_code, resp.text[:500])
    err = resp.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "invalid_request"
    assert words in err["message"] and "\n" not in err["message"], err
    return err["message"]


@pytest.fixture(scope="module")
def task():
    return next(iter(load_tasks().values()))


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_malformed_body_is_a_recorded_400(task, case, capfd):
    _, body, words = case
    gw = shared_gateway()
    token, _ = register(task)
    message = _assert_400(_post(gw.url, token, body), words)
    ok = _post(gw.url, token, json.dumps({"model": "diligent", "messages": [OK_MESSAGE]}))
    assert ok.status_code == 200, ok.text[:500]  # the handler and the run survive
    events, raw = gw.finish(token)
    assert [e["status"] for e in events] == [400, 200]
    assert events[0]["error"] == message and events[0]["call_index"] == 0
    assert raw[0]["status"] == 400 and raw[0]["response"]["error"]["message"] == message
    json.dumps(events), json.dumps(raw)  # the record itself can be written to the evidence store
    assert "Traceback" not in capfd.readouterr().err


def test_grid_py_gateway_answers_malformed_bodies_with_400_and_no_traceback():
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "grid.py"), "gateway"],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        first = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", first)
        assert match, first + (proc.stderr.read() if proc.poll() is not None else "")
        url = match.group(1)
        token = None
        while token is None:
            line = proc.stdout.readline()
            assert line, "gateway printed no demo token"
            found = re.search(r"api_key (demo-\S+)", line)
            token = found.group(1) if found else None
        for _, body, words in BAD:
            _assert_400(_post(url, token, body), words)
        ok = _post(url, token, json.dumps({"model": "m", "messages": [OK_MESSAGE]}))
        assert ok.status_code == 200, ok.text[:500]
        # Every dialect it prints is served there, refusing a bad body in one line.
        routes = []
        while not (line := proc.stdout.readline()).startswith("try:"):
            assert line, "gateway printed no example"
            routes += re.findall(r"^  dialect (\S+) +POST (\S+)$", line)
        assert len(routes) >= 3
        for _, route in routes:
            r = loopback_http.post(
                route, content=b"[1]", headers={"x-api-key": token, "authorization": f"Bearer {token}"}
            )
            assert r.status_code == 400 and "JSON object" in r.text and "\n" not in r.text, r.text[:500]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "RecursionError" not in err, err[-3000:]
