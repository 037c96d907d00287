"""One test per swap condition: what the caller sees and what the gateway log records."""

from __future__ import annotations

import pytest

from claimgrid.gateway import scripted as reference

from tests.test_gateway_support import drive, http_turn, litellm_turn, register, shared_gateway, workspace


@pytest.fixture
def served_by(monkeypatch):
    """Which reference policies the gateway really ran, in order."""
    seen: list[str] = []
    original = reference.next_turn

    def spy(policy, script, messages):
        seen.append(policy)
        return original(policy, script, messages)

    monkeypatch.setattr(reference, "next_turn", spy)
    return seen


def run(tasks, tmp_path, swap, turn=http_turn, stream=False):
    task = tasks["fix-float-add"]
    token, s = register(task, model="diligent", swap=swap, substitute="reader")
    final, infos, _ = drive(turn, shared_gateway().url, token, "diligent", task, workspace(task, tmp_path), stream)
    events, raw = shared_gateway().finish(token)
    assert s.unavailable_from_call in (-1, 2)
    return final, infos, events, raw


def test_swap_none(tasks, tmp_path, served_by):
    final, infos, events, _ = run(tasks, tmp_path, "none")
    assert final is not None and all(i["model"] == "diligent" for i in infos)
    assert not any(k.startswith("x-litellm") for i in infos for k in i["headers"])
    assert {(e["served_model"], e["reported_model"], e["swap"]) for e in events} == {("diligent", "diligent", "none")}
    assert set(served_by) == {"diligent"}


@pytest.mark.parametrize("turn", [http_turn, litellm_turn], ids=["httpx", "litellm"])
def test_swap_silent(tasks, tmp_path, served_by, turn):
    final, infos, events, _ = run(tasks, tmp_path, "silent", turn)
    # The caller is told "diligent" on every call, with no fallback header...
    assert all(i["model"] == "diligent" for i in infos)
    assert not any(k.startswith("x-litellm-attempted") for i in infos for k in i["headers"])
    # ...while the log shows that reader served from call 2 on, and the assigned model never ran then.
    assert [(e["served_model"], e["reported_model"], e["swap"]) for e in events] == [
        ("diligent", "diligent", "none")
    ] * 2 + [("reader", "diligent", "silent")] * (len(events) - 2)
    assert served_by[:2] == ["diligent", "diligent"] and set(served_by[2:]) == {"reader"}
    assert "reader" not in final["content"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_swap_reported(tasks, tmp_path, served_by, stream):
    final, infos, events, raw = run(tasks, tmp_path, "reported", stream=stream)
    assert [i["model"] for i in infos] == ["diligent"] * 2 + ["reader"] * (len(infos) - 2)
    for info in infos[2:]:
        assert info["headers"]["x-litellm-attempted-fallbacks"] == "1"
        assert info["headers"]["x-litellm-model-group"] == "reader"
        assert info["headers"]["x-litellm-model-id"]
    assert [(e["served_model"], e["reported_model"], e["swap"]) for e in events][2:] == [
        ("reader", "reader", "reported")
    ] * (len(events) - 2)
    assert raw[2]["response_headers"]["x-litellm-attempted-fallbacks"] == "1"
    assert set(served_by[2:]) == {"reader"}


def test_swap_reported_through_litellm_client(tasks, tmp_path):
    _, infos, events, _ = run(tasks, tmp_path, "reported", litellm_turn)
    assert [i["model"] for i in infos][2:] == ["reader"] * (len(infos) - 2)
    assert events[2]["served_model"] == "reader"


@pytest.mark.parametrize("turn", [http_turn, litellm_turn], ids=["httpx", "litellm"])
def test_swap_bound(tasks, tmp_path, served_by, turn):
    final, infos, events, raw = run(tasks, tmp_path, "bound", turn)
    assert final is None and len(infos) == 3
    assert infos[2]["status"] == 503
    assert (
        "the assigned model is unavailable and this run is bound to it; no substitute" in infos[2]["error"]["message"]
    )
    assert events[2]["swap"] == "bound" and events[2]["status"] == 503
    assert events[2]["served_model"] is None and events[2]["reported_model"] is None
    assert raw[2]["response"]["error"]["code"] == "model_unavailable"
    assert served_by == ["diligent", "diligent"]


@pytest.mark.parametrize("swap", ["silent", "reported"])
def test_substitute_may_be_the_assigned_model_itself(tasks, tmp_path, served_by, swap):
    """reader swapped for reader: the fallback goes to a separate substitute group and succeeds."""
    task = tasks["write-status"]
    token, _ = register(task, model="reader", swap=swap, substitute="reader")
    final, infos, _ = drive(http_turn, shared_gateway().url, token, "reader", task, workspace(task, tmp_path), False)
    events, _ = shared_gateway().finish(token)
    assert final is not None and all(e["status"] == 200 for e in events)
    assert [e["swap"] for e in events][2:] == [swap] * (len(events) - 2)
    assert {e["served_model"] for e in events} == {"reader"}
    if swap == "reported":
        assert infos[2]["headers"]["x-litellm-model-group"] == "reader"
