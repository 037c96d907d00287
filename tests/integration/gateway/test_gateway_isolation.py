"""Tokens, budgets and isolation: who can reach which run, and what never leaves the gateway."""

from __future__ import annotations

import json
import pickle
import re
import threading
from functools import partial

import pytest

from claimgrid.gateway import REFERENCE_MODEL_NAMES, RunScript
from claimgrid.gateway.exchanges import BLIND_MODEL
from claimgrid.inputs.conditions import load_content_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference import registry
from claimgrid.reference.gateway_faults import gateway_faults

from tests import loopback_http
from tests.test_gateway_support import drive, http_turn, register, run_tool, shared_gateway, workspace


def post(token, body, url=None):
    return loopback_http.post(
        f"{url or shared_gateway().url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def test_unknown_token_gets_401_with_an_openai_error(tasks):
    register(tasks["write-status"])  # another run is registered; its token is not guessed
    for headers in ({"Authorization": "Bearer not-a-run"}, {}, {"Authorization": "Basic abc"}):
        r = loopback_http.post(
            f"{shared_gateway().url}/chat/completions",
            headers=headers,
            timeout=30,
            json={"model": "diligent", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert loopback_http.get(f"{shared_gateway().url}/models", timeout=30).status_code == 401


def test_finished_token_is_no_longer_accepted(tasks):
    token, _ = register(tasks["write-status"])
    assert post(token, {"model": "diligent", "messages": [{"role": "user", "content": "x"}]}).status_code == 200
    events, _ = shared_gateway().finish(token)
    assert len(events) == 1
    assert post(token, {"model": "diligent", "messages": [{"role": "user", "content": "x"}]}).status_code == 401


def test_models_lists_the_runs_model_by_its_blinded_name_only(tasks):
    token, script = register(tasks["write-status"], model="overclaimer")
    r = loopback_http.get(f"{shared_gateway().url}/models", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    one = loopback_http.get(
        f"{shared_gateway().url}/models/{script.model}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    shared_gateway().finish(token)
    assert [m["id"] for m in r.json()["data"]] == [BLIND_MODEL]
    assert script.model not in r.text and script.substitute not in r.text  # the assigned name is not shown
    assert one.status_code == 404 and script.model not in one.text  # not this run's model; the ask is not echoed


def test_bad_request_body_is_refused_and_recorded(tasks):
    token, _ = register(tasks["write-status"])
    r = loopback_http.post(
        f"{shared_gateway().url}/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    assert post(token, {"model": "diligent", "messages": []}).status_code == 400
    events, raw = shared_gateway().finish(token)
    assert [(e["call_index"], e["status"]) for e in events] == [(0, 400), (1, 400)]
    assert raw[0]["request"] is None


def test_budget_refusal(tasks):
    token, _ = register(tasks["write-status"], model="looper", max_model_calls=3)
    body = {"model": "looper", "messages": [{"role": "user", "content": "go"}]}
    statuses = [post(token, body).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    r = post(token, body)
    err = r.json()["error"]
    assert err["type"] == "rate_limit_error" and err["code"] == "model_call_budget_exhausted"
    assert "budget of 3 model calls" in err["message"]
    assert r.headers["x-should-retry"] == "false"
    events, _ = shared_gateway().finish(token)
    assert [e["status"] for e in events] == [200, 200, 200, 429, 429, 429]
    assert all(e["served_model"] is None for e in events[3:])


def test_two_interleaved_runs_never_see_each_others_script(tasks, tmp_path):
    """Alternate calls of two runs; each must get exactly what it gets when alone."""
    a_task, b_task = tasks["fix-float-add"], tasks["write-status"]

    def alone(task, model, content):
        token, _ = register(task, model=model, content=content)
        _, _, msgs = drive(
            http_turn, shared_gateway().url, token, model, task, workspace(task, tmp_path, content), False
        )
        shared_gateway().finish(token)
        return [m for m in msgs if m["role"] == "assistant"]

    solo_a = alone(a_task, "obedient", "malicious")
    solo_b = alone(b_task, "diligent", "legitimate")
    ta, _ = register(a_task, model="obedient", content="malicious")
    tb, _ = register(b_task, model="diligent", content="legitimate")
    runs = {
        ta: (a_task, "obedient", workspace(a_task, tmp_path, "malicious"), []),
        tb: (b_task, "diligent", workspace(b_task, tmp_path, "legitimate"), []),
    }
    for task, _, _, msgs in runs.values():
        msgs.append({"role": "user", "content": task.spec.prompt})
    live = set(runs)
    while live:
        for t in sorted(live):
            task, model, ws, msgs = runs[t]
            message, info = http_turn(shared_gateway().url, t, model, msgs, False)
            assert info["status"] == 200
            msgs.append(message)
            for c in message.get("tool_calls") or []:
                msgs.append(
                    {
                        "role": "tool",
                        "tool_call_id": c["id"],
                        "content": run_tool(ws, c["function"]["name"], c["function"]["arguments"]),
                    }
                )
            if not message.get("tool_calls"):
                live.discard(t)

    def assistant(t):
        return [m for m in runs[t][3] if m["role"] == "assistant"]

    def strip_ids(ms):  # delegation ids differ between runs; everything else must be equal
        return [re.sub(r"delegation_id: \S+", "", json.dumps(m, sort_keys=True)) for m in ms]

    assert strip_ids(assistant(ta)) == strip_ids(solo_a)
    assert strip_ids(assistant(tb)) == strip_ids(solo_b)
    ea, _ = shared_gateway().finish(ta)
    eb, _ = shared_gateway().finish(tb)
    assert all(e["served_model"] == "obedient" for e in ea) and all(e["served_model"] == "diligent" for e in eb)


def test_many_concurrent_runs_stay_apart(tasks, tmp_path):
    """Eight runs at once (threads), each with its own model; every log holds only its own calls."""
    task = tasks["fix-float-add"]
    models = ["diligent", "obedient", "reader", "overclaimer", "narrator", "unknown-tool", "diligent", "reader"]
    results = {}

    def one(i, model):
        token, s = register(task, model=model, content="malicious")
        final, infos, msgs = drive(
            http_turn, shared_gateway().url, token, model, task, workspace(task, tmp_path, "malicious"), i % 2 == 1
        )
        results[i] = (s, final, infos, shared_gateway().finish(token))

    threads = [threading.Thread(target=one, args=(i, m)) for i, m in enumerate(models)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == len(models)
    for i, (s, final, infos, (events, _)) in results.items():
        assert f"delegation_id: {s.run_id}" in final["content"]
        assert {e["served_model"] for e in events} == {models[i]}
        assert len(events) == len(infos)


def answer_key_texts(task):
    """The task's solution texts: the ``new`` of reference edits and the content of reference writes."""
    out = []
    for step in task.spec.reference.steps:
        if step.tool == "edit_file":
            out.append(step.args["new"])
        if step.tool == "write_file":
            out.append(step.args["content"])
    return out


# The default tasks that have a solution text to leak (a review or no-op task has none).
_TASKS = sorted(t for t, task in in_suite(load_tasks(), "default").items() if answer_key_texts(task))


@pytest.mark.parametrize("task_id", _TASKS)
def test_reference_solution_only_leaves_as_the_models_own_tool_calls(tasks, tmp_path, task_id):
    """Every reference model on every default task, under every content condition (the
    conditions rotate over the models, shifted by task, so each model meets each content on
    some task): nothing of the task's solution crosses the gateway but the model's own
    tool-call arguments."""
    task = tasks[task_id]
    secrets = answer_key_texts(task)
    assert secrets
    contents = sorted(load_content_conditions())
    shift = _TASKS.index(task_id)
    # Gateway-side faults answer as their base policy (covered here); one of them waits
    # past a per-call deadline on purpose (tests/integration/gateway/test_gateway_faults.py).
    # The shipped models (a policies file another test of this worker loaded may add its own).
    shipped = [m for m in REFERENCE_MODEL_NAMES if registry.get(m).origin == "claimgrid" and m not in gateway_faults()]
    for i, model in enumerate(shipped):
        content = contents[(i + shift) % len(contents)]
        token, _ = register(task, model=model, content=content, max_model_calls=8)
        capture: list = []
        drive(
            partial(http_turn, capture=capture),
            shared_gateway().url,
            token,
            model,
            task,
            workspace(task, tmp_path, content),
            stream=bool(i % 2),
        )
        shared_gateway().finish(token)
        for headers, text in capture:
            # Remove the arguments of the model's own tool calls, then nothing may remain.
            text = re.sub(r'"arguments":\s*"(?:[^"\\]|\\.)*"', '"arguments":""', text)
            flat = json.dumps(headers) + text
            for secret in secrets:
                assert secret not in flat and json.dumps(secret)[1:-1] not in flat, (model, content)


def test_runscript_cannot_leave_the_process(tasks):
    task = tasks["fix-float-add"]
    _, s = register(task, model="diligent")
    with pytest.raises(TypeError):
        pickle.dumps(s)
    with pytest.raises(TypeError):
        json.dumps(s)
    assert "return a + b" not in repr(s) and "return a + b" not in str(s)
    assert isinstance(s, RunScript)
    # No route of the gateway returns a script: every other path is a 404 or 405.
    for path in ("/", "/v1", "/v1/scripts", "/v1/runs", "/debug"):
        assert loopback_http.get(shared_gateway().url.removesuffix("/v1") + path, timeout=30).status_code in (404, 405)


def test_request_cannot_steer_litellm(tasks):
    """LiteLLM-only request keys (mock_response, api_base, fallbacks...) are not forwarded."""
    token, _ = register(tasks["write-status"], model="diligent")
    body = {
        "model": "diligent",
        "messages": [{"role": "user", "content": "go"}],
        "mock_response": "FORGED DONE",
        "api_base": "http://203.0.113.1:9",
        "api_key": "x",
        "fallbacks": [{"diligent": ["narrator"]}],
        "mock_testing_fallbacks": True,
        "model_list": [],
        "metadata": {"x": 1},
    }
    r = post(token, body)
    assert r.status_code == 200
    message = r.json()["choices"][0]["message"]
    assert message["content"] is None and message["tool_calls"][0]["function"]["name"] == "read_file"
    events, raw = shared_gateway().finish(token)
    assert events[0]["served_model"] == "diligent" and events[0]["swap"] == "none"
    assert raw[0]["request"]["mock_response"] == "FORGED DONE"  # kept as evidence, not obeyed


def test_listening_socket_disables_nagle():
    import socket

    sock = shared_gateway()._sock
    assert sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY on accepted sockets only then
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert sock.getsockname()[0] == "127.0.0.1"


def test_the_token_not_the_requested_name_picks_the_model(tasks):
    token, _ = register(tasks["fix-float-add"], model="diligent")
    r = post(token, {"model": "narrator", "messages": [{"role": "user", "content": "go"}]})
    assert r.json()["choices"][0]["message"]["tool_calls"]  # diligent's read, not narrator's story
    events, _ = shared_gateway().finish(token)
    assert (events[0]["requested_model"], events[0]["assigned_model"], events[0]["served_model"]) == (
        "narrator",
        "diligent",
        "diligent",
    )
