"""Live real-model grids: skipped unless ``CLAIMGRID_LIVE=1``.

One small grid per framework (every framework in venvs.toml, one task, the control
conditions, one repeat) against

* a hosted model: ``CLAIMGRID_LIVE_MODEL`` (default ``openai/gpt-4o-mini``; its key from
  the environment, e.g. OPENAI_API_KEY), bounded by ``--max-cost 0.50``;
* a local OpenAI-compatible server: ``CLAIMGRID_LIVE_LOCAL_MODEL``, any LiteLLM model
  string such as ``ollama/llama3.1`` or ``hosted_vllm/<name>`` (with OLLAMA_API_BASE /
  HOSTED_VLLM_API_BASE); skipped when unset.

Each checks that every run completed, that cost is recorded (a positive ``cost_usd`` on
every answered exchange for a priced model; an unpriced local model is named in
``spend.unpriced_models`` with tokens counted), and that an offline replay of the new
ledger reproduces every classification.
"""

from __future__ import annotations

import os

import pytest

from tests.real_models_support import control_conditions, exchanges, frameworks, grid, meta, records

pytestmark = [
    pytest.mark.live,
    pytest.mark.frameworks,
    pytest.mark.skipif(
        os.environ.get("CLAIMGRID_LIVE") != "1",
        reason="live model test: set CLAIMGRID_LIVE=1 and the provider's key to run it",
    ),
]


def _model(kind: str) -> str | None:
    if kind == "hosted":
        return os.environ.get("CLAIMGRID_LIVE_MODEL", "openai/gpt-4o-mini")
    return os.environ.get("CLAIMGRID_LIVE_LOCAL_MODEL")


@pytest.mark.parametrize("kind", ["hosted", "local"])
def test_live_small_grid_records_cost_and_replays(kind, tmp_path, tasks):
    model = _model(kind)
    if not model:
        pytest.skip("set CLAIMGRID_LIVE_LOCAL_MODEL (e.g. ollama/llama3.1) to test a local server")
    content, swap = control_conditions()
    out = tmp_path / "live"
    p = grid(
        "run",
        "--out",
        str(out),
        "--no-progress",
        "--jobs",
        "2",
        "--frameworks",
        ",".join(frameworks()),
        "--tasks",
        next(iter(tasks)),
        "--content",
        content,
        "--swap",
        swap,
        "--models",
        model,
        "--substitute",
        model,
        "--max-cost",
        "0.50",
        "--timeout",
        "300",
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    runs = records(out)
    assert len(runs) == len(frameworks()), p.stdout[-3000:]
    spend = meta(out)["spend"]
    answered = [e for r in runs for e in exchanges(out, r) if e["status"] == 200]
    assert answered and spend["tokens"] > 0
    if spend["unpriced_calls"] == 0:
        assert all(e["cost_usd"] and e["cost_usd"] > 0 for e in answered)
        assert spend["cost_usd"] > 0
    else:
        assert model in spend["unpriced_models"] and spend["cost_complete"] is False

    replayed = tmp_path / "replayed"
    p = grid("replay", str(out), "--out", str(replayed), "--no-progress")
    again = records(replayed)
    assert {k: r["classification"] for k, r in again.items()} == {k: r["classification"] for k, r in runs.items()}, (
        p.stdout[-3000:]
    )
