"""The harness's reference-model answers equal the LiteLLM Router's.

Two real gateways over HTTP, one per reference path: ``router`` (every reference call
through LiteLLM's Router, its custom provider and ``mock_testing_fallbacks``, as every
reference call went before the harness answered them) and ``harness`` (claimgrid.gateway.scripted, the default). The same agent
loop drives both with the same run script, for every reference model x every swap
condition x JSON and SSE. Asserted equal, after masking only what is random per call
(response ``id``, ``created``, the ``date`` header, event ``t`` / ``latency_ms``):

- every response exactly as received (status, headers, body text);
- every exchange event the gateway recorded (served, reported, swap, status, cost_usd,
  usage, tool calls, content, fault...), and what the grid's Spend makes of them;
- every raw cassette record (request, response, response headers, request hash).

``x-litellm-model-id`` is random in the Router (a uuid4 per deployment and process); the
harness gives a stable uuid5 of the deployment (claimgrid.gateway.scripted explains
why). The test checks each side's form and stability, then masks it.
"""

from __future__ import annotations

import json
import uuid

import pytest

from claimgrid.gateway import Gateway, RunScript
from claimgrid.gateway.budget import Spend
from claimgrid.gateway.scripted import SUBSTITUTE_PREFIX, deployment_id
from claimgrid.gateway.swap import SWAPS
from claimgrid.reference import registry
from claimgrid.reference.policies import Turn
from claimgrid.reference.script import CallLimits

from tests import loopback_http
from tests.test_gateway_support import conditions, drive, http_turn, workspace

MODELS = list(registry.NAMES)  # every registered reference model, fault models included
SUBSTITUTE = registry.default_substitute()
TASK = "fix-float-add"
MASKED = "<masked>"


@pytest.fixture(scope="module")
def gateways():
    pair = {path: Gateway(reference_path=path) for path in ("router", "harness")}
    for gw in pair.values():
        gw.start()
    yield pair
    for gw in pair.values():
        gw.stop()


def _script(task, model: str, swap: str, content: str, run_id: str, substitute: str = SUBSTITUTE):
    cc, sc = conditions()
    # model_call_timeout_s=0: the ``slow`` fault waits this plus 2 s, not 17 s.
    return RunScript.for_cell(
        run_id,
        task,
        cc[content],
        sc[swap],
        model,
        substitute,
        task.role,
        limits=CallLimits(max_model_calls=24, model_call_timeout_s=0.0),
    )


def _mask_body(obj: dict) -> dict:
    return {k: (MASKED if k in ("id", "created") else v) for k, v in obj.items()}


def _normal_body(text: str, content_type: str) -> list:
    """The body with per-call random fields masked, keys kept in order (JSON or SSE)."""
    if content_type.startswith("text/event-stream"):
        out = []
        for line in text.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.dumps(_mask_body(json.loads(line[6:]))))
            else:
                out.append(line)
        return out
    return [json.dumps(_mask_body(json.loads(text)))]


def _model_ids(headers_list: list[dict]) -> set[str]:
    return {h["x-litellm-model-id"] for h in headers_list if "x-litellm-model-id" in h}


def _normal_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, MASKED if k == "x-litellm-model-id" else v) for k, v in headers if k != "date"]


def _normal_event(e: dict) -> dict:
    return {k: v for k, v in e.items() if k not in ("t", "latency_ms")}


def _normal_raw(r: dict) -> dict:
    r = dict(r, t=MASKED)
    if isinstance(r.get("response"), dict) and "id" in r["response"]:
        r["response"] = _mask_body(r["response"])
    headers = dict(r.get("response_headers") or {})
    if "x-litellm-model-id" in headers:
        headers["x-litellm-model-id"] = MASKED
    r["response_headers"] = headers
    return r


def _drive(gw: Gateway, task, s: RunScript, stream: bool, tmp_path, content: str):
    """One agent loop against ``gw``: every response as received (status, headers, body
    text), the final message, the run's events and raw records."""
    token = f"tok-{uuid.uuid4().hex}"
    gw.register(token, s)
    received: list = []

    def turn(url, token, model, messages, stream):
        capture: list = []
        message, info = http_turn(url, token, model, messages, stream, capture=capture)
        headers, text = capture[0]
        received.append((info["status"], list(headers.items()), text))
        return message, info

    final, _, _ = drive(turn, gw.url, token, s.model, task, workspace(task, tmp_path, content), stream)
    events, raw = gw.finish(token)
    return final, received, events, raw


def _compare(router, harness, substitute: str):
    (r_final, r_resp, r_events, r_raw), (h_final, h_resp, h_events, h_raw) = router, harness
    assert len(r_resp) == len(h_resp) and len(r_events) == len(h_events) and r_events
    # x-litellm-model-id: the Router's is a uuid4 of its substitute deployment, the same on
    # every call; the harness's is the stable uuid5 of that deployment.
    r_ids = _model_ids([dict(h) for _, h, _ in r_resp])
    h_ids = _model_ids([dict(h) for _, h, _ in h_resp])
    assert len(r_ids) <= 1 and all(uuid.UUID(i).version == 4 for i in r_ids)
    assert h_ids == ({deployment_id(SUBSTITUTE_PREFIX + substitute)} if r_ids else set())
    for i, ((rs, rh, rb), (hs, hh, hb)) in enumerate(zip(r_resp, h_resp)):
        assert rs == hs, f"call {i}: status"
        assert _normal_headers(rh) == _normal_headers(hh), f"call {i}: headers"
        content_type = dict(rh).get("content-type", "")
        assert _normal_body(rb, content_type) == _normal_body(hb, content_type), f"call {i}: body"
    assert [_normal_event(e) for e in r_events] == [_normal_event(e) for e in h_events]
    assert [_normal_raw(r) for r in r_raw] == [_normal_raw(r) for r in h_raw]
    spends = []
    for events in (r_events, h_events):
        spend = Spend()
        spend.add_events(events)
        spends.append(spend.snapshot())
    assert spends[0] == spends[1]
    assert r_final == h_final


# Every model, as JSON and as a stream, each under a different swap mode; the swap modes
# rotate over the models, so every mode meets a quarter of the models in each form (the full
# cross product of 40 models x 4 modes x 2 forms was a tenth of the suite's CPU time).
_CASES = [
    pytest.param(model, SWAPS[(i + k) % len(SWAPS)], stream, id=f"{model}-{SWAPS[(i + k) % len(SWAPS)]}-{form}")
    for i, model in enumerate(MODELS)
    for k, (stream, form) in enumerate([(False, "json"), (True, "sse")])
]


@pytest.mark.parametrize("model,swap,stream", _CASES)
def test_harness_answers_as_the_router(gateways, tasks, tmp_path, model, swap, stream):
    task = tasks[TASK]
    # malicious content: obedient and the injection-aware policies take their other branch
    content = "malicious"
    run_id = f"r-{uuid.uuid4().hex[:8]}"
    results = {
        path: _drive(gw, task, _script(task, model, swap, content, run_id), stream, tmp_path, content)
        for path, gw in gateways.items()
    }
    _compare(results["router"], results["harness"], SUBSTITUTE)
    events = results["harness"][2]
    if swap in ("silent", "reported") and any(e["status"] == 200 and e["swap"] == swap for e in events):
        assert {e["served_model"] for e in events if e["swap"] == swap} == {SUBSTITUTE}


@pytest.mark.parametrize("swap", ["silent", "reported"])
@pytest.mark.parametrize("model,substitute", [("reader", "reader"), ("narrator", "diligent"), ("diligent", "obedient")])
def test_other_substitutes(gateways, tasks, tmp_path, model, substitute, swap):
    """A substitute other than the default one, and a model substituting for itself."""
    task = tasks["write-status"]
    run_id = f"r-{uuid.uuid4().hex[:8]}"
    results = {
        path: _drive(gw, task, _script(task, model, swap, "clean", run_id, substitute), False, tmp_path, "clean")
        for path, gw in gateways.items()
    }
    _compare(results["router"], results["harness"], substitute)


ODD_MESSAGES = [
    {"role": "system", "content": [{"type": "text", "text": "You are an agent."}]},
    {"role": "user", "content": "Fix it.", "name": "boss"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [{"type": "text", "text": "file text"}, {"type": "text", "text": "more"}],
    },
    {"role": "user", "content": ""},
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_odd_message_shapes(gateways, tasks, stream):
    """Content-part lists, None and empty contents, extra keys: the policy and the token
    estimate see the same messages on both paths (the Router does not reshape them)."""

    task = tasks[TASK]
    run_id = f"r-{uuid.uuid4().hex[:8]}"
    seen = {}
    for path, gw in gateways.items():
        token = f"tok-{uuid.uuid4().hex}"
        gw.register(token, _script(task, "diligent", "none", "clean", run_id))
        body = {"model": "some/name", "messages": ODD_MESSAGES, "stream": stream, "temperature": 0.2}
        r = loopback_http.post(f"{gw.url}/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"})
        events, raw = gw.finish(token)
        seen[path] = (
            r.status_code,
            _normal_headers(list(r.headers.items())),
            _normal_body(r.text, r.headers["content-type"]),
            [_normal_event(e) for e in events],
            [_normal_raw(x) for x in raw],
        )
    assert seen["router"][0] == 200
    assert seen["router"] == seen["harness"]


@pytest.fixture
def raising_policy():
    """A user policy that raises (registered for this test only)."""

    def boom(script, messages):
        raise ValueError("policy exploded\nsecond line")

    registry.register(registry.ReferenceModel("probe-raises", boom, "raises"))
    yield "probe-raises"
    registry._REGISTRY.pop("probe-raises", None)


@pytest.mark.parametrize("swap", ["none", "silent", "reported"])
def test_a_raising_policy_is_a_recorded_500_naming_no_model(gateways, tasks, raising_policy, swap):
    """The one deliberate difference: the Router's message for a failed substitute names
    the assigned model and the substitute's group (blinding); the harness's names none."""

    task = tasks[TASK]
    model, substitute = (raising_policy, "reader") if swap == "none" else ("diligent", raising_policy)
    gw = gateways["harness"]
    token = f"tok-{uuid.uuid4().hex}"
    gw.register(token, _script(task, model, swap, "clean", f"r-{uuid.uuid4().hex[:8]}", substitute))
    msgs = [{"role": "user", "content": "go"}]
    statuses = [
        loopback_http.post(
            f"{gw.url}/chat/completions",
            json={"model": "m", "messages": msgs},
            headers={"Authorization": f"Bearer {token}"},
        )
        for _ in range(3)
    ]
    events, _ = gw.finish(token)
    failed = statuses[0] if swap == "none" else statuses[2]
    event = events[0] if swap == "none" else events[2]
    assert failed.status_code == 500 and event["status"] == 500
    error = failed.json()["error"]
    assert error["code"] == "upstream_error"
    assert "policy exploded" in error["message"] and "ValueError" in error["message"]
    for name in ("diligent", raising_policy, "substitute::"):
        assert name not in error["message"]
    assert event["served_model"] is None and event["swap"] == swap


def test_a_reference_turn_is_the_same_dict_litellm_builds():
    """The Router path wraps the harness's completion dict in LiteLLM's ModelResponse and
    cleans it back (upstream._clean): a no-op on every field a client sees, the message
    fields beside the text (a refusal, reasoning content) included, in the same place."""
    from claimgrid.gateway import providers, upstream
    from claimgrid.reference.policies import MESSAGE_EXTRAS, ToolCall

    call = ToolCall("c", "f", '{"a": 1}')
    extras = [Turn(content=None, extra=((key, f"{key} text"),)) for key in MESSAGE_EXTRAS]
    extras += [Turn(content="done", tool_calls=(call,), extra=((key, f"{key} text"),)) for key in MESSAGE_EXTRAS]
    for turn in (Turn(content="done"), Turn(content=None, tool_calls=(call,)), Turn(content=""), *extras):
        resp = providers.turn_to_response(turn, "diligent", [{"role": "user", "content": "abcdefgh"}])
        cleaned = upstream._clean(resp, "diligent")
        from claimgrid.gateway.scripted import completion

        mine = completion(turn, "diligent", [{"role": "user", "content": "abcdefgh"}])
        assert _mask_body(cleaned) == _mask_body(mine)
        # Same keys in the same order: a client sees the JSON text, and so does the parity test.
        assert json.dumps(_mask_body(cleaned)) == json.dumps(_mask_body(mine)), turn
