"""Each reference model through raw HTTP and through the LiteLLM client, JSON and SSE.

The test plays the framework: it executes the tool calls against a copy of the fixture,
so a passing test shows the reference models do real work through tool calls only.
"""

from __future__ import annotations

import json

import pytest

from claimgrid.gateway import REFERENCE_MODEL_NAMES
from claimgrid.reference.gateway_faults import gateway_faults
from claimgrid.trace import parse_trace

from tests.test_gateway_support import changed, drive, http_turn, litellm_turn, register, shared_gateway, workspace

CLIENTS = {"httpx": http_turn, "litellm": litellm_turn}
EXPECTED_CHANGES = {
    "diligent": {"src/calculator.py"},
    "obedient": {"src/calculator.py"},
    "overclaimer": {"src/calculator.py"},
    "narrator": set(),
    "reader": set(),
    "malformed": set(),
    "unknown-tool": set(),
    "looper": set(),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("client", list(CLIENTS))
# Gateway-side faults (an HTTP error or an altered answer at one call) are
# tests/integration/gateway/test_gateway_faults.py's: this loop plays a client that does not retry.
# The models whose changes this table states (the gaming models and the probes are checked
# through the real pipeline by the grid and conformance tests).
@pytest.mark.parametrize(
    "model", [m for m in REFERENCE_MODEL_NAMES if m not in gateway_faults() and m in EXPECTED_CHANGES]
)
def test_reference_model_tool_loop(tasks, tmp_path, model, client, stream):
    task = tasks["fix-float-add"]
    budget = 6 if model == "looper" else 24
    token, s = register(task, model=model, max_model_calls=budget)
    gw = shared_gateway()
    ws = workspace(task, tmp_path)
    final, infos, messages = drive(CLIENTS[client], gw.url, token, model, task, ws, stream)
    events, raw = gw.finish(token)

    assert changed(task, ws) == EXPECTED_CHANGES[model]
    if model == "looper":
        assert final is None and infos[-1]["status"] == 429 and len(infos) == budget + 1
    else:
        trace, err = parse_trace(final["content"])
        assert err is None and trace["status"] == "DONE"
        assert all(i["model"] == model for i in infos)
        assert all(i["usage"]["completion_tokens"] > 0 for i in infos)

    # The gateway log: one event per request, in order, truthful about who served.
    assert [e["call_index"] for e in events] == list(range(len(infos)))
    assert [r["call_index"] for r in raw] == list(range(len(infos)))
    ok = [e for e in events if e["status"] == 200]
    assert all(e["served_model"] == e["assigned_model"] == model and e["swap"] == "none" for e in ok)
    assert all(e["stream"] is stream for e in events)
    sent_calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    logged_calls = [c for e in ok for c in e["tool_calls"]]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in sent_calls] == [
        (c["id"], c["name"], c["arguments"]) for c in logged_calls
    ]
    if final is not None:
        assert ok[-1]["content"] == final["content"] and ok[-1]["finish_reason"] == "stop"
    # Each request logs the tool results that are new in it: together, every result once, in order.
    logged_results = [r for e in ok for r in e["tool_results"]]
    sent_results = [m["content"] for m in messages if m["role"] == "tool"]
    assert logged_results == sent_results[: len(logged_results)]
    assert len(logged_results) >= len(sent_results) - 1  # the last results may follow the final answer
    assert all(e["cost_usd"] is None for e in events)  # no price for a reference policy, never 0
    json.dumps(raw)  # the evidence folder stores it as JSON lines


def test_diligent_fix_passes_the_task_tests(tasks, tmp_path):
    import subprocess
    import sys

    task = tasks["fix-float-add"]
    token, _ = register(task, model="diligent")
    ws = workspace(task, tmp_path)
    drive(http_turn, shared_gateway().url, token, "diligent", task, ws, stream=False)
    shared_gateway().finish(token)
    proc = subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
