"""Gateway-side faults (claimgrid/reference/gateway_faults.py) over raw HTTP, the grid's restriction
of fault models to clean content / no swap (cells.plan), and the fault facts of a record."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from claimgrid.classify.reactions import duplicate_side_effects, fault_facts
from claimgrid.execute.cells import allowed, plan
from claimgrid.execute.spec import Selection
from claimgrid.gateway import RunScript
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.reference import registry
from claimgrid.reference.gateway_faults import CUT_PREFIX, GatewayFault, gateway_faults
from claimgrid.reference.registry import ReferenceModel, untreated
from claimgrid.reference.script import CallLimits

from tests import loopback_http
from tests.test_gateway_support import TOOLS, shared_gateway

GATEWAY_FAULTS = gateway_faults()
UNTREATED = next(c for c in load_content_conditions().values() if c.carries is None)
NO_SWAP = next(s for s in load_swap_conditions().values() if s.unavailable_from_call < 0)


def _register(task, model, deadline=15.0):
    s = RunScript.for_cell(
        f"r-{uuid.uuid4().hex[:8]}",
        task,
        UNTREATED,
        NO_SWAP,
        model,
        registry.default_substitute(),
        task.role,
        limits=CallLimits(model_call_timeout_s=deadline),
    )
    token = f"tok-{uuid.uuid4().hex}"
    shared_gateway().register(token, s)
    return token


def _post(token, model, messages, stream=False):
    body = {"model": model, "messages": messages, "tools": TOOLS}
    if stream:
        body |= {"stream": True}
    return loopback_http.post(
        f"{shared_gateway().url}/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _first_two(tasks, model, deadline=15.0):
    """Call 0 (served as the base policy) and call 1 (the faulted one) of a run."""
    task = tasks["fix-float-add"]
    token = _register(task, model, deadline)
    messages = [{"role": "user", "content": "do the task"}]
    r0 = _post(token, model, messages)
    assert r0.status_code == 200
    m0 = r0.json()["choices"][0]["message"]
    messages = messages + [m0] + [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in m0["tool_calls"]]
    t0 = time.monotonic()
    r1 = _post(token, model, messages)
    return token, messages, r1, time.monotonic() - t0


def _builtin_faults() -> list[str]:
    """The shipped fault models (a policies file another test of this worker loaded may add its own)."""
    return [m for m in registry.fault_models() if registry.get(m).origin == "claimgrid"]


def test_every_gateway_fault_is_a_registered_default_fault_model():
    assert GATEWAY_FAULTS and set(GATEWAY_FAULTS) <= set(_builtin_faults()) <= set(registry.default_models())
    for name in _builtin_faults():
        entry = registry.get(name)
        assert entry.truth is not None and entry.runs_in is untreated, name
        # The behaviour text names the side the fault is on, read from the entry's data.
        side = (
            "gateway fault:"
            if entry.gateway_fault
            else "tool fault:"
            if entry.tool_fault
            else "shape:"
            if entry.shape
            else "fault:"
        )
        assert entry.behaviour.startswith(side), name
    assert all(isinstance(f, GatewayFault) for f in GATEWAY_FAULTS.values())


@pytest.mark.parametrize("model", [m for m, f in GATEWAY_FAULTS.items() if f.refuses])
def test_refusals_happen_once_and_the_retry_is_served(tasks, model):
    token, messages, r1, _ = _first_two(tasks, model)
    fault = GATEWAY_FAULTS[model]
    assert r1.status_code == (500 if fault.kind == "server_error" else 429)
    if fault.kind == "rate_limited":
        assert r1.headers["retry-after"] == str(fault.retry_after_s)
        assert r1.headers.get("x-should-retry") != "false"
    r2 = _post(token, model, messages)  # the same request again: a retry
    assert r2.status_code == 200 and r2.json()["choices"][0]["message"]["tool_calls"]
    events, _raw = shared_gateway().finish(token)
    assert [e.get("fault") for e in events] == [None, fault.kind, None]
    assert events[1]["messages_n"] == events[2]["messages_n"]
    facts = fault_facts(model, events + [{"source": "process", "kind": "exit"}], {"process": "ok", "claimed": True})
    assert (facts["fault_call"], facts["attempts_at_fault"], facts["retried"], facts["reaction"]) == (
        1,
        2,
        True,
        "reported DONE",
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_cut_off_is_truncated_and_the_model_redoes_the_step(tasks, stream):
    task = tasks["fix-float-add"]
    token = _register(task, "cut-off")
    diligent_token = _register(task, "diligent")
    messages = [{"role": "user", "content": "do the task"}]
    m0 = _post(token, "cut-off", messages).json()["choices"][0]["message"]
    messages += [m0] + [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in m0["tool_calls"]]
    r1 = _post(token, "cut-off", messages, stream=stream)
    assert r1.status_code == 200
    # What diligent would have sent at this step, whole (its run goes through the same
    # conversation: a policy's step is its run's progress, not the request alone).
    _post(diligent_token, "diligent", messages[:1])
    whole = _post(diligent_token, "diligent", messages).json()["choices"][0]["message"]["tool_calls"][0]
    if not stream:
        choice = r1.json()["choices"][0]
        call = choice["message"]["tool_calls"][0]
        assert choice["finish_reason"] == "length" and call["id"].startswith(CUT_PREFIX)
    else:  # assemble the SSE deltas as a streaming client does
        chunks = [json.loads(ln[6:]) for ln in r1.text.split("\n") if ln.startswith("data: {")]
        finish = [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices")]
        deltas = [tc for c in chunks if c.get("choices") for tc in c["choices"][0]["delta"].get("tool_calls") or []]
        assert "length" in finish and deltas
        call = {
            "id": next(d["id"] for d in deltas if d.get("id")),
            "function": {
                "name": next(d["function"]["name"] for d in deltas if d["function"].get("name")),
                "arguments": "".join(d["function"].get("arguments") or "" for d in deltas),
            },
        }
        assert call["id"].startswith(CUT_PREFIX)
    assert call["function"]["name"] == whole["function"]["name"]
    assert whole["function"]["arguments"].startswith(call["function"]["arguments"])
    with pytest.raises(ValueError):
        json.loads(call["function"]["arguments"])
    # The framework sends the cut call back with an error; the model redoes the whole step.
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [dict(call, type="function")]},
        {"role": "tool", "tool_call_id": call["id"], "content": "error: arguments are not JSON"},
    ]
    redo = _post(token, "cut-off", messages).json()["choices"][0]["message"]["tool_calls"][0]
    assert (redo["function"]["name"], redo["function"]["arguments"]) == (
        whole["function"]["name"],
        whole["function"]["arguments"],
    )
    events, _ = shared_gateway().finish(token)
    shared_gateway().finish(diligent_token)
    assert [e.get("fault") for e in events] == [None, "cut_off", None]
    assert events[1]["finish_reason"] == "length"


def test_empty_completion(tasks):
    token, _, r1, _ = _first_two(tasks, "empty-completion")
    choice = r1.json()["choices"][0]
    assert r1.status_code == 200 and choice["message"]["content"] == "" and not choice["message"].get("tool_calls")
    events, _ = shared_gateway().finish(token)
    assert events[1]["fault"] == "empty" and events[1]["finish_reason"] == "stop"


def test_slow_answers_past_the_per_call_deadline_and_is_logged_first(tasks):
    token, _, r1, took = _first_two(tasks, "slow", deadline=0.5)
    fault = GATEWAY_FAULTS["slow"]
    assert r1.status_code == 200 and took >= 0.5 + fault.delay_past_deadline_s - 0.1
    events, _ = shared_gateway().finish(token)
    assert events[1]["fault"] == "slow" and events[1]["delayed_s"] == 0.5 + fault.delay_past_deadline_s


def test_fault_models_run_only_on_untreated_content_without_swap(tasks):
    cc, sc = load_content_conditions(), load_swap_conditions()
    content, swap = list(cc), list(sc)
    models = registry.default_models()
    faults = _builtin_faults()
    assert faults and set(faults) < set(models)
    cells = plan(
        Selection(
            frameworks=["a", "b"],
            tasks=list(tasks),
            content=content,
            swap=swap,
            models=models,
            substitute=registry.default_substitute(),
            repeats=1,
        )
    )
    faulty = [c for c in cells if c.model in faults]
    assert {(c.content, c.swap) for c in faulty} == {(UNTREATED.name, NO_SWAP.name)}
    assert len(faulty) == 2 * len(tasks) * len(faults)
    # Each model is crossed with the conditions its entry's runs_in admits (gaming models, too,
    # run on the untreated cell only without being fault models).
    crossed = sum(registry.get(m).runs_with(c, s) for m in models for c in cc.values() for s in sc.values())
    restricted = [m for m in models if registry.get(m).runs_in is not None]
    assert crossed == (len(models) - len(restricted)) * len(content) * len(swap) + len(restricted)
    assert len(cells) == 2 * len(tasks) * crossed
    treated = next(c for c in cc.values() if c.carries is not None)
    swapped = next(s for s in sc.values() if s.unavailable_from_call >= 0)
    assert allowed(models[0], treated, swapped) and not allowed(faults[0], treated, NO_SWAP)
    assert not allowed(faults[0], UNTREATED, swapped) and allowed(faults[0], UNTREATED, NO_SWAP)


def test_the_restriction_is_data_on_the_entry():
    """Another predicate on an entry gives another plan (condition objects, not names)."""
    only_no_swap = lambda c, s: s.unavailable_from_call < 0  # noqa: E731
    entry = ReferenceModel(
        "test-only-no-swap", registry.get(registry.default_models()[0]).policy, "test entry", runs_in=only_no_swap
    )
    registry.register(entry)
    try:
        content, swap = list(load_content_conditions()), list(load_swap_conditions())
        cells = plan(
            Selection(
                frameworks=["a"],
                tasks=["t"],
                content=content,
                swap=swap,
                models=[entry.name],
                substitute="x",
                repeats=1,
            )
        )
        assert {c.swap for c in cells} == {NO_SWAP.name} and len(cells) == len(content)
    finally:
        del registry._REGISTRY[entry.name]


def test_duplicate_side_effects_count_repeated_effects_only():
    ev = lambda tool, cat, args: {"source": "tools", "tool": tool, "category": cat, "args": args}  # noqa: E731
    events = [
        ev("read_file", "read", {"path": "a"}),
        ev("read_file", "read", {"path": "a"}),
        ev("write_file", "write", {"path": "o", "content": "x"}),
        ev("write_file", "write", {"content": "x", "path": "o"}),
        ev("run_command", "bash", {"command": "make"}),
        ev("run_command", "bash", {"command": "make test"}),
    ]
    assert duplicate_side_effects(events) == 1
