"""Real-model grids through ``grid.py`` on every framework, against a loopback provider
: budget stop and resume, provider retries kept apart from the experiment, and
an offline replay of a real-model ledger.

The provider is tests/fake_upstream.py reached as ``openai/gpt-4o-mini`` with
OPENAI_API_BASE / OPENAI_API_KEY, exactly as a hosted API is configured; LiteLLM's bundled
price map prices that name, so cost is real LiteLLM arithmetic on real token counts.
"""

from __future__ import annotations

import pytest

from claimgrid.gateway import Gateway

from tests.fake_upstream import FakeUpstream
from tests.real_models_support import (
    control_conditions,
    exchanges,
    final_answer_protocols,
    frameworks,
    grid,
    lines,
    meta,
    records,
)
from tests.test_gateway_support import script

pytestmark = [pytest.mark.frameworks, pytest.mark.deep]

MODEL = "openai/gpt-4o-mini"  # priced in LiteLLM's bundled map; served by the loopback upstream


@pytest.fixture(scope="module")
def task_id(tasks):
    return next(iter(tasks))


@pytest.fixture(scope="module")
def upstream(tasks, task_id):
    inner = Gateway()
    inner.start()
    # One inner registration per run: the inner gateway steps each run's policy by its own record.
    # A framework that ends on a final-answer call gets its answer as that call (venvs.toml).
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


def _small(task_id, repeats=2, fws=None):
    content, swap = control_conditions()
    return [
        "--frameworks",
        ",".join(fws or frameworks()),
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
        "--repeats",
        str(repeats),
    ]


def _out(p):
    return p.stdout[-4000:] + p.stderr[-3000:]


def test_budget_stops_new_runs_and_resume_with_a_higher_limit_continues(tmp_path, upstream, task_id):
    upstream.reset()
    out = tmp_path / "grid"
    # One run per framework: each meets the priced provider once; one run finishes, the
    # others are not started until the resume. --max-inflight 1: with --jobs 1 alone the
    # scheduler may start a second run while the first waits on the provider (a waiting run
    # does not hold a job), before the first exchange's cost is counted.
    # The budget is the scheduler's and the gateway's, not a framework's: the first three
    # frameworks of venvs.toml are enough to see one run finish, the others wait, and the
    # resume project its spend while a run is still to come (the runs are serial here, so
    # each framework more was most of a minute more of the suite).
    fws = frameworks()[:3]
    n = len(fws)
    assert n >= 3
    p = grid(
        "run",
        "--out",
        str(out),
        "--no-progress",
        "--jobs",
        "1",
        "--max-inflight",
        "1",
        "--max-cost",
        "0.000001",
        *_small(task_id, repeats=1, fws=fws),
        env=_env(upstream),
    )
    assert p.returncode == 0, _out(p)
    stop = meta(out)["stopped_at_budget"]
    done = records(out)
    # One run was in flight when the first exchange crossed the limit: it finished; no other started.
    assert len(done) == 1 and stop["runs_done"] == 1 and stop["runs_not_started"] == n - 1
    assert stop["limit"] == "max_cost_usd" and stop["max_cost_usd"] == 0.000001
    assert stop["cost_usd"] >= 0.000001 and stop["cost_complete"] is True
    assert "stopped at budget (max_cost_usd)" in p.stdout and "--resume" in p.stdout
    assert "spend $" in p.stdout and (out / "LEDGER.md").is_file()
    first = next(iter(done.values()))
    assert first["classification"]["claim_vs_outcome"] == "TRUE_SUCCESS"

    # Resuming under the same limit starts nothing and says so again.
    p = grid("run", "--resume", str(out), "--no-progress", env=_env(upstream))
    assert p.returncode == 0, _out(p)
    assert len(records(out)) == 1 and meta(out)["stopped_at_budget"]["runs_not_started"] == n - 1

    # A higher limit continues the grid to the end.
    p = grid("run", "--resume", str(out), "--no-progress", "--max-cost", "5", env=_env(upstream))
    assert p.returncode == 0, _out(p)
    after = records(out)
    assert len(after) == n and after[first["run_id"]] == first
    m = meta(out)
    assert m["stopped_at_budget"] is None and len(m["budget_stops"]) == 2 and m["budget"]["max_cost_usd"] == 5
    assert "proj. $" in p.stdout  # the projection for the whole grid once runs are done
    # The exchanges that reached the provider (a call the gateway refused itself, e.g. past a
    # framework's turn limit, has no provider and no price).
    costs = [e["cost_usd"] for r in after for e in exchanges(out, r) if e["provider"]]
    assert all(c is not None and c > 0 for c in costs)
    assert m["spend"]["cost_usd"] == pytest.approx(sum(costs), rel=1e-6)
    assert m["spend"]["calls"] == sum(len(exchanges(out, r)) for r in after) and m["spend"]["unpriced_calls"] == 0


def test_provider_faults_are_retried_apart_from_the_experiment(tmp_path, upstream, task_id):
    """Half the runs meet a 429 (Retry-After 1), a 500 and a reset on their first call:
    retried in the gateway, the run is classified as if nothing happened. The other half
    meet a provider that fails their second call past the retries: UNKNOWN with reason
    provider. Then the ledger is replayed offline, with no key and no provider."""
    faults_retry = {0: ("status", 429, {"Retry-After": "1"}), 1: ("status", 500), 2: ("reset",)}
    # Runs are known to the provider only by their opaque delegation id: alternate the two
    # fault profiles over runs in the order they first call; the records say which run had which.
    profiles: dict[str, str] = {}

    def plan(key, n):
        if not key:
            return None
        profile = profiles.setdefault(key, "retry" if len(profiles) % 2 == 0 else "fail")
        if profile == "retry":
            return faults_retry.get(n)
        return ("status", 500) if 1 <= n <= 4 else None

    upstream.reset(plan)
    out = tmp_path / "grid"
    p = grid(
        "run",
        "--out",
        str(out),
        "--no-progress",
        "--jobs",
        "2",
        "--provider-retries",
        "3",
        "--provider-backoff",
        "0.05",
        *_small(task_id),
        env=_env(upstream),
    )
    assert p.returncode == 0, _out(p)
    runs = records(out)
    assert len(runs) == len(frameworks()) * 2
    assert sorted(set(profiles.values())) == ["fail", "retry"]
    for run_id, r in runs.items():
        c, ex = r["classification"], [e for e in exchanges(out, run_id) if e["provider"]]  # reached the provider
        delegation = r["facts"]["delegation_id"]
        # Every attempt the provider saw is in the gateway log, none hidden.
        assert len(upstream.requests_for(delegation)) == sum(e["provider"]["attempts"] for e in ex), run_id
        if profiles[delegation] == "retry":
            assert [e["status"] for e in ex[0]["provider"]["errors"]] == [429, 500, None], run_id
            assert ex[0]["provider"]["errors"][0]["wait_s"] >= 1.0
            assert all(e["status"] == 200 for e in ex), run_id  # the agent never saw a failure
            runtime = [e for e in lines(out / "runs" / run_id / "events.jsonl") if e["source"] == "runtime"]
            assert not [e for e in runtime if e["kind"] == "error"], run_id
            assert (c["unknown_reason"], c["process"], c["claim_vs_outcome"]) == (None, "ok", "TRUE_SUCCESS"), (
                run_id,
                c,
            )
        else:
            failed = [e for e in ex if e["provider"]["failed"]]
            assert len(failed) == 1 and failed[0]["provider"]["attempts"] == 4 and failed[0]["status"] == 500
            assert (c["unknown_reason"], c["outcome"], c["claim_vs_outcome"]) == ("provider", "UNKNOWN", "UNKNOWN"), c
            assert c["swap"] == "none"  # not counted as a swap
    health = meta(out)["spend"]["providers"][MODEL]
    assert health["failures"] == list(profiles.values()).count("fail")
    assert health["retries"] == sum(e["provider"]["retries"] for r in runs for e in exchanges(out, r) if e["provider"])

    # Replay: offline, no key; the provider's faults and the UNKNOWN runs come back identical.
    replayed = tmp_path / "replayed"
    p = grid(
        "replay",
        str(out),
        "--out",
        str(replayed),
        "--no-progress",
        env={"OPENAI_API_KEY": "", "OPENAI_API_BASE": "http://127.0.0.1:9/v1"},
    )
    assert p.returncode == 0, _out(p)
    again = records(replayed)
    assert {k: r["classification"] for k, r in again.items()} == {k: r["classification"] for k, r in runs.items()}
    for run_id in runs:
        assert [e["replay"]["match"] for e in exchanges(replayed, run_id)] == [True] * len(exchanges(out, run_id)), (
            run_id
        )


def test_a_real_model_ledger_tests_framework_differences_as_paired_comparisons(tmp_path, upstream, task_id):
    """A LiteLLM model (not a reference model) is stochastic: LEDGER.md tests every framework
    pair on the same cells with the exact McNemar test (Holm over the ledger's tests) and states
    a difference only when the adjusted p is below 0.05, recomputed here from the records."""
    from claimgrid.ledger.stats import holm, mcnemar_exact, p_text

    upstream.reset()
    out = tmp_path / "grid"
    fws = frameworks()[:2]
    p = grid("run", "--out", str(out), "--no-progress", *_small(task_id, repeats=2, fws=fws), env=_env(upstream))
    assert p.returncode == 0, _out(p)
    md = (out / "LEDGER.md").read_text()
    assert f"{MODEL} (stochastic)" in md
    table = md[md.index("### Paired framework tests (stochastic models)") :]
    recs = list(records(out).values())
    by = {(r["repeat"], r["framework"]): r["classification"]["claim_vs_outcome"] for r in recs}
    outcomes = ("TRUE_SUCCESS", "FALSE_SUCCESS")
    counts = {}
    for outcome in outcomes:
        pairs = [(by[(rep, fws[0])], by[(rep, fws[1])]) for rep in (0, 1)]
        pairs = [(a, b) for a, b in pairs if "UNKNOWN" not in (a, b)]
        counts[outcome] = (
            len(pairs),
            sum(a == outcome != b for a, b in pairs),
            sum(b == outcome != a for a, b in pairs),
        )
    adjusted = holm([mcnemar_exact(k1, k2) for _, k1, k2 in counts.values()])
    for (outcome, (n, k1, k2)), q in zip(counts.items(), adjusted):
        row = next(
            line
            for line in table.splitlines()
            if line.startswith(f"| {MODEL} | `{outcome}` rate | {fws[0]} vs {fws[1]} |")
        )
        assert f"| {n} | {k1} | {k2} |" in row
        # two repeats can never reach 0.05 (the smallest exact p on 2 discordant cells is 0.5)
        assert q >= 0.05 and f"no difference shown (n={n}, p={p_text(q)})" in row
    assert "**Paired framework tests**" in md[md.index("## 0. Summary") : md.index("## 1. Design")]
