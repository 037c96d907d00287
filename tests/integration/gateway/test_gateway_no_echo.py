"""No error answer of the gateway echoes request data (issue 51: a path id quoted in a 404 let
a guarded agent read its own run token). A marker goes into every part of a request the agent
controls (path, query, headers, body values, the key itself) on every route, and into a harness
error's exception text; no answer that is not a 2xx holds it. The run's record still holds what
it recorded (the 500's whole line)."""

from __future__ import annotations

import json
import uuid

import httpx

from claimgrid.gateway import app as gateway_app
from claimgrid.gateway.dialects import dialects
from claimgrid.inputs.tasks import load_tasks

from tests import loopback_http
from tests.test_gateway_support import register, shared_gateway


def _root() -> str:
    url = shared_gateway().url
    assert url is not None and url.endswith("/v1")
    return url[: -len("/v1")]


def _bodies(mark: str) -> list[bytes]:
    """Bodies each refused by some check, every one holding the marker in a value."""
    return [
        json.dumps({"model": mark, "messages": []}).encode(),
        json.dumps({"model": mark, "messages": [{"role": mark, "content": mark}]}).encode(),
        json.dumps({"model": mark, "input": [{"type": mark}], "messages": mark, "max_tokens": mark}).encode(),
        json.dumps({"model": mark, "temperature": mark, "stream": mark, "tools": [{"type": mark}]}).encode(),
        json.dumps([mark]).encode(),
        b'{"model": "' + mark.encode() + b'", oops',
    ]


def test_no_error_answer_quotes_the_request():
    token, _ = register(next(iter(load_tasks().values())))
    mark = "ECHO" + uuid.uuid4().hex
    root, answers = _root(), []
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json", f"x-{mark}": mark}
    paths = sorted({p for d in dialects() for p in d.paths} | {"/v1/messages/count_tokens"})
    for path in paths:
        for body in _bodies(mark):
            for extra in ({}, {"anthropic-version": "2023-06-01"}):
                answers.append(
                    loopback_http.post(
                        f"{root}{path}?{mark}={mark}", content=body, headers={**headers, **extra}, timeout=30
                    )
                )
    for path in (f"/v1/models/{mark}", f"/v1/models/a/{mark}", f"/v1/{mark}", f"/{mark}"):
        for extra in ({}, {"anthropic-version": "2023-06-01"}):
            answers.append(loopback_http.get(f"{root}{path}?q={mark}", headers={**headers, **extra}, timeout=30))
    answers.append(httpx.put(f"{root}/v1/models?{mark}", headers=headers, timeout=30, verify=loopback_http.TLS))  # 405
    for key in ({"authorization": f"Bearer {mark}"}, {"x-api-key": mark}):  # an unknown key: 401
        answers.append(loopback_http.post(f"{root}/v1/messages", content=_bodies(mark)[0], headers=key, timeout=30))
        answers.append(loopback_http.get(f"{root}/v1/models/{mark}", headers=key, timeout=30))
    shared_gateway().finish(token)
    refused = [r for r in answers if r.status_code >= 400]
    assert len(refused) == len(answers), [r.status_code for r in answers if r.status_code < 400]
    assert {r.status_code for r in refused} >= {400, 401, 404, 405}
    echoed = [
        (r.request.method, str(r.request.url)[:80], r.status_code, r.text[:200])
        for r in refused
        if mark in r.text or any(mark in v for v in r.headers.values())
    ]
    assert echoed == []


def test_a_harness_error_is_recorded_whole_and_answered_without_its_text(monkeypatch):
    token, _ = register(next(iter(load_tasks().values())))
    mark = "ECHO" + uuid.uuid4().hex

    async def broken(self, request, state, index, t0, dialect):
        raise ValueError(f"a harness bug that quotes the request: {mark}")

    monkeypatch.setattr(gateway_app._ModelCalls, "chat", broken)
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    r = loopback_http.post(
        f"{shared_gateway().url}/chat/completions", json=body, headers={"authorization": f"Bearer {token}"}, timeout=30
    )
    events, raw = shared_gateway().finish(token)
    assert r.status_code == 500 and r.json()["error"]["code"] == "gateway_error"
    assert mark not in r.text and "ValueError" in r.text
    assert [e["status"] for e in events] == [500] and mark in events[0]["error"]  # the record keeps it
