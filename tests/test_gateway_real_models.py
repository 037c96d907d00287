"""A LiteLLM model string as assigned model and as substitute, without the internet.

The "real" provider is a second gateway on 127.0.0.1 reached as ``openai/gpt-4o-mini``
(OPENAI_API_BASE / OPENAI_API_KEY from the environment, as for a hosted API), so the
Router's ordinary OpenAI deployment path, usage and LiteLLM's cost lookup are exercised.
"""

from __future__ import annotations

import pytest

from claimgrid.gateway import Gateway
from tests.test_gateway_support import (drive, http_turn, register, script, shared_gateway,
                                        workspace)


@pytest.fixture
def upstream(monkeypatch, tasks):
    gw2 = Gateway()
    url = gw2.start()
    gw2.register("upstream-key", script(tasks["fix-float-add"], model="diligent", max_model_calls=100))
    monkeypatch.setenv("OPENAI_API_BASE", url)
    monkeypatch.setenv("OPENAI_API_KEY", "upstream-key")
    yield gw2
    gw2.stop()


def test_real_model_as_assigned_and_as_reported_substitute(tasks, tmp_path, upstream):
    task = tasks["fix-float-add"]
    token, _ = register(task, model="openai/gpt-4o-mini", substitute="reader")
    final, infos, _ = drive(http_turn, shared_gateway().url, token, "gpt-4o-mini", task,
                            workspace(task, tmp_path), stream=False)
    events, _ = shared_gateway().finish(token)
    assert final is not None and "trace:" in final["content"]
    assert {e["served_model"] for e in events} == {"openai/gpt-4o-mini"}
    assert all(e["cost_usd"] is not None and e["cost_usd"] > 0 for e in events)
    assert all(e["usage"]["prompt_tokens"] > 0 for e in events)
    upstream_events, _ = upstream.finish("upstream-key")
    assert len(upstream_events) == len(events)  # every call really went upstream

    upstream.register("upstream-key", script(task, model="diligent", max_model_calls=100))
    token, _ = register(task, model="diligent", swap="reported", substitute="openai/gpt-4o-mini")
    _, infos, _ = drive(http_turn, shared_gateway().url, token, "diligent", task,
                        workspace(task, tmp_path), stream=True)
    events, _ = shared_gateway().finish(token)
    assert [e["served_model"] for e in events][:3] == ["diligent", "diligent", "openai/gpt-4o-mini"]
    assert infos[2]["model"] == "openai/gpt-4o-mini"
    assert infos[2]["headers"]["x-litellm-attempted-fallbacks"] == "1"


def test_unknown_price_is_null_not_zero(tasks, tmp_path, upstream):
    task = tasks["fix-float-add"]
    token, _ = register(task, model="openai/claimgrid-unpriced-model")
    message, info = http_turn(shared_gateway().url, token, "claimgrid-unpriced-model",
                              [{"role": "user", "content": "go"}], False)
    events, _ = shared_gateway().finish(token)
    assert info["status"] == 200 and message["tool_calls"]
    assert events[0]["cost_usd"] is None


def test_upstream_failure_is_recorded_not_raised(tasks, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{port}/v1")
    token, _ = register(tasks["write-status"], model="openai/claimgrid-nowhere-model")
    _, info = http_turn(shared_gateway().url, token, "x", [{"role": "user", "content": "go"}], False)
    events, _ = shared_gateway().finish(token)
    assert info["status"] >= 500 and info["error"]["code"] == "upstream_error"
    assert events[0]["status"] == info["status"] and events[0]["served_model"] is None
    assert events[0]["error"]
