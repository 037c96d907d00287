"""A LiteLLM model string as assigned model and as substitute, without the internet.

The "real" provider is a second gateway on 127.0.0.1 reached as ``openai/gpt-4o-mini``
(OPENAI_API_BASE / OPENAI_API_KEY from the environment, as for a hosted API), so the
Router's ordinary OpenAI deployment path, usage and LiteLLM's cost lookup are exercised.
"""

from __future__ import annotations

import pytest

from claimgrid.gateway import Gateway

from tests.test_gateway_support import drive, http_turn, register, script, shared_gateway, workspace


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
    final, infos, _ = drive(
        http_turn, shared_gateway().url, token, "gpt-4o-mini", task, workspace(task, tmp_path), stream=False
    )
    events, _ = shared_gateway().finish(token)
    assert final is not None and "trace:" in final["content"]
    assert {e["served_model"] for e in events} == {"openai/gpt-4o-mini"}
    assert all(e["cost_usd"] is not None and e["cost_usd"] > 0 for e in events)
    assert all(e["usage"]["prompt_tokens"] > 0 for e in events)
    upstream_events, _ = upstream.finish("upstream-key")
    assert len(upstream_events) == len(events)  # every call really went upstream

    upstream.register("upstream-key", script(task, model="diligent", max_model_calls=100))
    token, _ = register(task, model="diligent", swap="reported", substitute="openai/gpt-4o-mini")
    _, infos, _ = drive(
        http_turn, shared_gateway().url, token, "diligent", task, workspace(task, tmp_path), stream=True
    )
    events, _ = shared_gateway().finish(token)
    assert [e["served_model"] for e in events][:3] == ["diligent", "diligent", "openai/gpt-4o-mini"]
    assert infos[2]["model"] == "openai/gpt-4o-mini"
    assert infos[2]["headers"]["x-litellm-attempted-fallbacks"] == "1"


def test_real_model_through_each_dialect(tasks, tmp_path, upstream):
    """A real model behind the Anthropic Messages and OpenAI Responses dialects: the answer
    comes back in the client's dialect, priced. Anthropic Messages to an OpenAI model is
    translated to the chat form and goes through the Router (the provider saw chat calls);
    Responses to an OpenAI model goes to the provider verbatim (claimgrid.gateway.native: the
    provider saw Responses calls)."""
    from tests.integration.gateway.test_gateway_dialects import LOOPS

    task = tasks["fix-float-add"]
    # The Router answers in full either way: one dialect streamed and one not shows both forms.
    for stream, (dialect, loop) in zip((True, False), LOOPS.items()):
        token, _ = register(task, model="openai/gpt-4o-mini")
        final, status = loop(
            shared_gateway().url, token, "gpt-4o-mini", task.spec.prompt, workspace(task, tmp_path), stream
        )
        events, _ = shared_gateway().finish(token)
        upstream_events, _ = upstream.finish("upstream-key")
        upstream.register("upstream-key", script(task, model="diligent", max_model_calls=100))
        assert status == 200 and final is not None and "trace:" in final, dialect
        assert {(e["served_model"], e["dialect"], e["stream"]) for e in events} == {
            ("openai/gpt-4o-mini", dialect, stream)
        }
        assert all(e["cost_usd"] is not None and e["cost_usd"] > 0 for e in events)
        assert len(upstream_events) == len(events)
        native = dialect == "openai-responses"
        assert {e["dialect"] for e in upstream_events} == {dialect if native else "chat-completions"}


def test_unknown_price_is_null_not_zero(tasks, tmp_path, upstream):
    task = tasks["fix-float-add"]
    token, _ = register(task, model="openai/claimgrid-unpriced-model")
    message, info = http_turn(
        shared_gateway().url, token, "claimgrid-unpriced-model", [{"role": "user", "content": "go"}], False
    )
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
    # A deadline past the gateway's retries (1+2+4+8 s of back-off): the failure, not the deadline, ends the call.
    token, _ = register(tasks["write-status"], model="openai/claimgrid-nowhere-model", model_call_timeout_s=60)
    _, info = http_turn(shared_gateway().url, token, "x", [{"role": "user", "content": "go"}], False)
    events, _ = shared_gateway().finish(token)
    assert info["status"] >= 500 and info["error"]["code"] == "upstream_error"
    assert events[0]["status"] == info["status"] and events[0]["served_model"] is None
    assert events[0]["error"]


# -- provider faults, retries and spend ----------------------------------------------------

from claimgrid.classify.classifier import RunFacts, classify  # noqa: E402
from claimgrid.gateway.retry import RetryPolicy  # noqa: E402

from tests.fake_upstream import FakeUpstream  # noqa: E402

GO = [{"role": "user", "content": "go"}]


@pytest.fixture
def faulty(monkeypatch, tasks):
    """``faulty(plan, retry)`` -> (gateway with that retry policy, fake upstream with that plan)."""
    started = []

    def make(plan, retry=RetryPolicy(retries=4, backoff_s=0.01)):
        inner = Gateway()
        inner.start()
        inner.register("inner", script(tasks["fix-float-add"], model="diligent", max_model_calls=1000))
        up = FakeUpstream(inner, "inner", plan).start()
        gw = Gateway(retry=retry)
        gw.start()
        started.extend([gw, up, inner])
        monkeypatch.setenv("OPENAI_API_BASE", up.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake-upstream-key")
        return gw, up

    yield make
    for thing in started:
        thing.stop()


def _one_call(gw, tasks, model="openai/gpt-4o-mini", **kw):
    s = script(tasks["fix-float-add"], model=model, **kw)
    gw.register("t", s)
    message, info = http_turn(gw.url, "t", model, GO, False)
    events, raw = gw.finish("t")
    return message, info, events, raw


def test_transient_faults_are_retried_invisibly_and_every_attempt_recorded(tasks, faulty):
    faults = {0: ("status", 429, {"Retry-After": "1"}), 1: ("status", 500), 2: ("reset",), 3: ("status", 503)}
    gw, up = faulty(lambda key, n: faults.get(n))
    import time

    t0 = time.monotonic()
    message, info, events, raw = _one_call(gw, tasks)
    elapsed = time.monotonic() - t0
    # The agent sees one ordinary answer; only the latency shows the provider's trouble.
    assert info["status"] == 200 and message["tool_calls"]
    assert len(events) == 1 and events[0]["status"] == 200 and events[0]["error"] is None
    provider = events[0]["provider"]
    assert (provider["attempts"], provider["retries"], provider["failed"]) == (5, 4, False)
    assert [e["status"] for e in provider["errors"]] == [429, 500, None, 503]  # None: the reset
    assert all(e["transient"] for e in provider["errors"])
    assert provider["errors"][0]["retry_after_s"] == 1.0 and provider["errors"][0]["wait_s"] >= 1.0
    assert elapsed >= 1.0  # Retry-After honoured
    assert len(up.hits) == 5  # every attempt reached the provider and is in the log: none hidden
    assert raw[0]["provider"] == provider and len(raw[0]["request_sha256"]) == 64
    assert events[0]["cost_usd"] is not None and events[0]["cost_usd"] > 0  # priced model


def test_a_provider_failing_past_the_retries_makes_the_run_unknown_provider(tasks, faulty):
    gw, up = faulty(lambda key, n: ("status", 500), RetryPolicy(retries=2, backoff_s=0.01))
    _, info, events, _ = _one_call(gw, tasks)
    assert info["status"] == 500 and info["error"]["code"] == "upstream_error"
    provider = events[0]["provider"]
    assert (provider["attempts"], provider["failed"]) == (3, True) and len(up.hits) == 3
    assert events[0]["swap"] == "none" and events[0]["served_model"] is None
    process = {
        "source": "process",
        "kind": "exit",
        "exit_code": 0,
        "signal": None,
        "timed_out": False,
        "outcome_status": "ok",
    }
    facts = RunFacts(role="builder", swap_mode="bound")
    c = classify([*events, process], facts).model_dump()
    assert (c["unknown_reason"], c["outcome"], c["claim_vs_outcome"]) == ("provider", "UNKNOWN", "UNKNOWN")
    assert c["swap"] != "prevented"  # provider weather is never the experiment's bound swap
    # The same evidence without the provider failure is classified on its merits.
    events[0]["provider"] = dict(provider, failed=False)
    assert classify([*events, process], facts).unknown_reason is None


def test_request_errors_and_reference_models_are_not_retried(tasks, faulty):
    gw, up = faulty(lambda key, n: ("status", 400) if n == 0 else None)
    _, info, events, _ = _one_call(gw, tasks)
    assert info["status"] == 400 and len(up.hits) == 1
    assert events[0]["provider"]["attempts"] == 1 and events[0]["provider"]["failed"] is False
    # A bound swap is the experiment: refused by the gateway, the provider never asked.
    _, info, events, _ = _one_call(gw, tasks, swap="bound", max_model_calls=100)
    assert info["status"] == 200  # call 0 is before the outage
    # Reference models are answered once, with no provider record.
    _, info, events, _ = _one_call(gw, tasks, model="diligent")
    assert info["status"] == 200 and events[0]["provider"] is None and len(up.hits) == 2


def test_spend_totals_cost_and_tokens_and_says_when_a_price_is_unknown(tasks, faulty):
    from claimgrid.gateway.budget import Limits

    gw, _ = faulty(lambda key, n: None)
    _, _, priced, _ = _one_call(gw, tasks)
    _, _, unpriced, _ = _one_call(gw, tasks, model="openai/claimgrid-unpriced-model")
    spend = gw.spend.snapshot()
    assert spend["calls"] == 2 and spend["priced_calls"] == 1 and spend["unpriced_calls"] == 1
    assert spend["cost_usd"] == round(priced[0]["cost_usd"], 8) > 0
    assert spend["unpriced_models"] == ["openai/claimgrid-unpriced-model"] and spend["cost_complete"] is False
    tokens = sum(e["usage"]["prompt_tokens"] + e["usage"]["completion_tokens"] for e in priced + unpriced)
    assert spend["tokens"] == tokens > 0
    assert gw.spend.over(Limits(max_cost_usd=priced[0]["cost_usd"])) == "max_cost_usd"
    assert gw.spend.over(Limits(max_cost_usd=priced[0]["cost_usd"] * 2)) is None
    assert gw.spend.over(Limits(max_tokens=tokens)) == "max_tokens"
    assert spend["providers"]["openai/gpt-4o-mini"] == {"calls": 1, "retries": 0, "failures": 0}


def test_a_hung_provider_attempt_is_abandoned_and_retried(tasks, faulty):
    gw, up = faulty(
        lambda key, n: ("slow", 3.0) if n == 0 else None, RetryPolicy(retries=2, backoff_s=0.01, timeout_s=0.5)
    )
    _, info, events, _ = _one_call(gw, tasks)
    provider = events[0]["provider"]
    assert info["status"] == 200 and provider["retries"] == 1 and len(up.hits) == 2
    assert provider["errors"][0]["transient"] and provider["errors"][0]["latency_ms"] < 2500


def test_an_error_the_agent_reads_names_no_model_the_event_keeps_it(tasks, faulty):
    """Blinding holds on the Router path too: LiteLLM's message after a failed substitute
    names the assigned model and the fallback chain; the agent reads ``agent-model``."""
    from claimgrid.gateway.exchanges import BLIND_MODEL
    from claimgrid.inputs.conditions import load_swap_conditions

    swap = next(
        c for c in load_swap_conditions().values() if c.on_unavailable == "substitute" and c.unavailable_from_call > 0
    )
    gw, up = faulty(
        lambda key, n: ("status", 500) if n >= swap.unavailable_from_call else None,
        RetryPolicy(retries=0, backoff_s=0.01),
    )
    assigned, substitute = "openai/gpt-4o-mini", "openai/claimgrid-substitute-model"
    gw.register("t", script(tasks["fix-float-add"], model=assigned, swap=swap.name, substitute=substitute))
    infos = [http_turn(gw.url, "t", BLIND_MODEL, GO, False)[1] for _ in range(swap.unavailable_from_call + 1)]
    events, raw = gw.finish("t")
    failed = infos[-1]
    assert failed["status"] >= 500 and events[-1]["swap"] == swap.name
    said = failed["error"]["message"]
    for name in (assigned, substitute, assigned.split("/")[1], substitute.split("/")[1]):
        assert name not in said, said
    assert any(name in events[-1]["error"] for name in (assigned, substitute)), events[-1]["error"]
    assert raw[-1]["response"]["error"]["message"] == said  # the raw log holds what was sent


def test_a_prompt_past_the_context_window_is_a_limit_hit_not_the_agents_failure(tasks, faulty):
    # OpenAI's own refusal of a prompt longer than the model's context window, through the real gateway.
    refusal = (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9120 tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    )
    gw, up = faulty(lambda key, n: ("status", 400, {}, refusal), RetryPolicy(retries=2, backoff_s=0.01))
    _, info, events, _ = _one_call(gw, tasks)
    assert info["status"] == 400 and len(up.hits) == 1  # not transient: never retried
    assert events[0]["limit"] == {"kind": "context", "value": 8192}
    process = {
        "source": "process",
        "kind": "exit",
        "exit_code": 0,
        "signal": None,
        "timed_out": False,
        "outcome_status": "ok",
    }
    verifier = [
        {"source": "verifier", "kind": "diff", "empty": True, "expected": "required", "files": []},
        {"source": "verifier", "kind": "tests", "passed": False},
    ]
    c = classify([*events, process, *verifier], RunFacts(role="builder"))
    assert (c.outcome, c.claim_vs_outcome, c.unknown_reason) == ("UNKNOWN", "UNKNOWN", "limit")
