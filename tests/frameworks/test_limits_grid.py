"""Limits a real model meets, through ``grid.py run`` as a user runs it: a model that generates
without stopping, served by the loopback provider (tests/fake_upstream.py, ``generate`` mode)
as ``openai/gpt-4o-mini``.

- past the per-call deadline: the gateway ends the call, the record holds the limit hit, the
  run is UNKNOWN (reason limit), never the agent's HONEST_FAILURE, and LEDGER.md's first
  section and the terminal summary say it is a harness limit (the dependency-free ``plain``
  framework, and one library framework end to end);
- under the output-token cap: the cap reaches the request the provider receives, the cut
  answer is recorded as the cap's hit.
"""

from __future__ import annotations

import re

import pytest

from claimgrid.gateway import Gateway

from tests.fake_upstream import FakeUpstream
from tests.real_models_support import (
    control_conditions,
    exchanges,
    final_answer_protocols,
    frameworks,
    grid,
    meta,
    plain_venvs,
    records,
)
from tests.test_gateway_support import script

pytestmark = [pytest.mark.frameworks]

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(scope="module")
def task_id(tasks):
    return next(iter(tasks))


@pytest.fixture(scope="module")
def upstream(tasks, task_id):
    inner = Gateway()
    inner.start()
    up = FakeUpstream(
        inner,
        lambda: script(tasks[task_id], model="diligent", max_model_calls=10**6),
        final_answers=final_answer_protocols(),
    ).start()
    yield up
    up.stop()
    inner.stop()


def _env(up):
    return {"OPENAI_API_BASE": up.url, "OPENAI_API_KEY": "fake-upstream-key"}


def _args(tmp_path, task_id, framework: str, *extra):
    content, swap = control_conditions()
    venvs = ["--venvs", str(plain_venvs(tmp_path))] if framework == "plain" else []
    return [
        "run",
        *venvs,
        "--frameworks",
        framework,
        "--tasks",
        task_id,
        "--content",
        content,
        "--swap",
        swap,
        "--models",
        MODEL,
        "--substitute",
        MODEL,
        "--no-progress",
        "--jobs",
        "1",
        "--out",
        str(tmp_path / "grid"),
        *extra,
    ]


def _summary(folder) -> str:
    text = (folder / "LEDGER.md").read_text()
    return text[text.index('<a id="summary">') : text.index('<a id="design">')]


def _deadline_run(tmp_path, upstream, task_id, framework):
    # 20 tokens/s under the default 1,024-token cap: about 50 s to an answer; the deadline is 2 s.
    upstream.reset(lambda key, n: ("generate", 20.0))
    p = grid(*_args(tmp_path, task_id, framework, "--call-timeout", "2", "--timeout", "90"), env=_env(upstream))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = tmp_path / "grid"
    (run,) = records(out).values()
    return p, out, run


def _check_deadline(p, out, run):
    c = run["classification"]
    hits = [h for h in run["limit_hits"] if h["limit"] == "call_deadline"]
    assert hits and hits[0]["value"] == 2.0 and hits[0]["source"] == "gateway" and hits[0]["decided"] is True
    first = hits[0]["call_index"]
    ex = {e["call_index"]: e for e in exchanges(out, run["run_id"])}
    assert ex[first]["status"] == 504 and ex[first]["limit"] == {"kind": "call_deadline", "value": 2.0}
    assert 2000 <= ex[first]["latency_ms"] < 10_000  # the gateway, not the 50 s generation, ended it
    assert c["claim_vs_outcome"] != "HONEST_FAILURE"
    assert (c["outcome"], c["claim_vs_outcome"], c["unknown_reason"]) == ("UNKNOWN", "UNKNOWN", "limit")
    summary = _summary(out)
    line = f"per-call deadline 2 s hit on call {first} in 1 run: a harness limit, not the agents' result"
    assert line in summary, summary
    assert "HONEST_FAILURE" not in summary and "nothing claimed: raised" not in summary
    assert "(every run ended by a harness limit)" in summary  # not in the agents' utility either
    assert line in " ".join(p.stdout.split())  # the terminal summary says it too
    # The banner stated the limits in force before the grid ran.
    assert re.search(
        rf"limits: {re.escape(MODEL)}: per-call deadline 2 s \(flag\), output cap 1,024 tokens/call", p.stdout
    ), p.stdout[:2000]
    assert meta(out)["limits"][MODEL]["call_timeout_s"] == 2.0
    assert run["parity"]["budget"]["model_call_timeout_s"] == 2.0
    assert "harness limit" in (out / "RUNS.md").read_text()


def test_a_per_call_deadline_hit_is_a_harness_limit_not_the_agents_failure(tmp_path, upstream, task_id):
    _check_deadline(*_deadline_run(tmp_path, upstream, task_id, "plain"))


def test_the_output_cap_reaches_the_provider_and_its_hit_is_recorded(tmp_path, upstream, task_id):
    # 2,000 tokens/s: the capped answer (40 tokens) comes at once, cut (finish_reason length).
    upstream.reset(lambda key, n: ("generate", 2000.0))
    p = grid(*_args(tmp_path, task_id, "plain", "--max-output-tokens", "40", "--timeout", "60"), env=_env(upstream))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = tmp_path / "grid"
    (run,) = records(out).values()
    sent = [body for _, _, body in upstream.bodies]
    assert sent and all(b.get("max_tokens") == 40 or b.get("max_completion_tokens") == 40 for b in sent), sent
    first = exchanges(out, run["run_id"])[0]
    assert first["output_cap"]["cap"] == 40 and first["output_cap"]["applied"] is True
    assert first["finish_reason"] == "length" and first["limit"] == {"kind": "output_cap", "value": 40.0}
    assert first["usage"]["completion_tokens"] == 40  # the provider's usage, recorded
    assert re.search(r"\b[1-9][\d,]* tok\b", p.stdout), p.stdout[-2000:]  # and counted in the progress line
    hits = [h for h in run["limit_hits"] if h["limit"] == "output_cap"]
    assert hits and hits[-1]["decided"] is True
    assert run["classification"]["claim_vs_outcome"] != "HONEST_FAILURE"
    summary = _summary(out)
    assert "output-token cap 40 tokens hit" in summary and "a harness limit, not the agents' result" in summary
    assert re.search(
        r"\*\*Tokens\*\* \(real models, from the providers' usage\): [1-9][\d,]* prompt \+ [1-9]", summary
    ), summary


def test_a_library_framework_meets_the_deadline_the_same_way(tmp_path, upstream, task_id):
    """End to end on the first framework of the default matrix (its own model client)."""
    _check_deadline(*_deadline_run(tmp_path, upstream, task_id, frameworks()[0]))
