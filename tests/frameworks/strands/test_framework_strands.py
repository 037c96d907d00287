"""The Strands adapter, run for real: its venv, the harness launcher, the gateway's reference models.

Each run goes through ``claimgrid.launch.Launcher`` (a child forked from the Strands warm
parent) against ``claimgrid.gateway.Gateway``; the workspace is built with
``tasks.build_template`` + ``materialise`` and checked from outside after the process exits.
"""

from __future__ import annotations

import dataclasses

import pytest

from claimgrid.inputs.venvs import load_venvs
from claimgrid.launch import Launcher

from tests.conftest import ROOT
from tests.framework_support import (  # noqa: F401
    assert_no_tool_calls,
    assert_read_only,
    assert_runtime_matches_harness,
    assert_task_tests_pass,
    entry,
    gateway,
    make_run_cell,
    warm_launcher,
)

pytestmark = pytest.mark.frameworks

# Strands' own throttling retry is kept (venvs.toml retry_backoff_s): the deadline allows for it.
TIMEOUT_S = 120 + load_venvs()["strands"].retry_backoff_s


@pytest.fixture(scope="module")
def launcher():
    yield from warm_launcher("strands")


@pytest.fixture
def run_cell(tmp_path, tasks, gateway, launcher):  # noqa: F811
    return make_run_cell("strands", tmp_path, tasks, gateway, launcher, TIMEOUT_S)


def _assert_clean_run(r: dict) -> None:
    assert r["outcome"]["error"] is None, r["outcome"]["error"]
    assert r["process"]["timed_out"] is False
    assert r["outcome"]["versions"]["strands-agents"] == "1.62.0"
    # One runtime model_call per gateway exchange, all attributed to the Strands agent.
    assert len(r["runtime_models"]) == len(r["gateway"]) > 0
    assert {e["agent"] for e in r["runtime_models"]} == {r["agent_name"]}
    assert all(e["usage"]["completion_tokens"] is not None for e in r["runtime_models"])
    final = r["outcome"]["final_text"]
    assert final and [m["text"] for m in r["runtime_messages"]] == [final]


def test_diligent_write_status_writes_exact_file(run_cell):
    r = run_cell("write-status", "diligent")
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    assert (r["ws"] / "output" / "status.txt").read_bytes() == b"CLAIMGRID_OK"
    assert "write_file" in {e["tool"] for e in r["runtime_tools"]}


def test_diligent_fix_float_add_makes_tests_pass(run_cell):
    r = run_cell("fix-float-add", "diligent")
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    assert any(e["changed_workspace"] for e in r["tools"])
    assert_task_tests_pass(r)


def test_narrator_calls_no_tool(run_cell):
    r = run_cell("write-status", "narrator")
    _assert_clean_run(r)
    assert_no_tool_calls(r)
    assert not (r["ws"] / "output" / "status.txt").exists()


def test_reader_only_reads(run_cell):
    r = run_cell("fix-float-add", "reader")
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    assert_read_only(r)


@pytest.mark.parametrize("swap", ["reported", "silent"])
def test_runtime_model_name_is_what_responses_said(run_cell, swap):
    """Strands drops the response model; the adapter reads it from each call's openai
    response, so a reported swap shows in the runtime channel and a silent one does not
    (only the gateway knows)."""
    r = run_cell("fix-float-add", "diligent", swap)
    _assert_clean_run(r)
    told = [e["reported_model"] for e in r["gateway"]]
    assert "reader" in {e["served_model"] for e in r["gateway"]}
    assert [e["model"] for e in r["runtime_models"]] == told
    assert ("reader" in told) == (swap == "reported")


def _assert_budget_refusal_propagates(r: dict) -> None:
    """Every refused attempt is one gateway 429 and one runtime error; the last refusal ends
    the run as an error (Strands wraps its ModelThrottledException in its EventLoopException),
    not a report."""
    attempts = r["outcome"]["versions"]["retries"]["strands_model_retry"]["max_attempts"]
    assert attempts > 1
    assert r["process"]["timed_out"] is False
    statuses = [e["status"] for e in r["gateway"]]
    assert statuses.count(429) == attempts and statuses[-attempts:] == [429] * attempts
    assert r["outcome"]["final_text"] is None
    assert r["outcome"]["error"]["type"] == "EventLoopException"
    assert "model_call_budget_exhausted" in r["outcome"]["error"]["message"]
    errors = [e["type"] for e in r["outcome"]["events"] if e["kind"] == "error"]
    assert errors == ["ModelThrottledException"] * attempts


@pytest.fixture(scope="module")
def quick_retry_launcher():
    """Strands' adapter with Strands' own retry at fewer, shorter attempts
    (tests/fixtures/frameworks/strands_quick_retry: its documented ``retry_strategy``)."""
    quick = dataclasses.replace(
        entry("strands"), adapter=ROOT / "tests/fixtures/frameworks/strands_quick_retry/adapter.py"
    )
    with Launcher({"strands": quick}, "fresh") as la:
        yield la


def test_looper_budget_refusal_is_retried_by_strands_and_propagates(run_cell, quick_retry_launcher):
    """Strands has no cycle limit: the gateway's 429 ends the run, as an error, not a report.
    OpenAIModel raises ModelThrottledException on the 429 and Strands' own retry strategy
    tries it again up to its max_attempts (no client retry underneath): the path of the
    deep test below, with Strands' retry configured to three attempts a second apart."""
    _assert_budget_refusal_propagates(run_cell("write-status", "looper", via=quick_retry_launcher))


# Its wall time is Strands' own default back-off against the budget's 429 (venvs.toml
# retry_backoff_s), a wait and not a core: the quick test above walks the same path.
@pytest.mark.deep
@pytest.mark.waits_s(load_venvs()["strands"].retry_backoff_s)
def test_looper_is_stopped_by_the_gateway_budget_and_the_error_propagates(run_cell):
    """The same, with Strands' default retry (venvs.toml ``retry_backoff_s`` of waiting)."""
    _assert_budget_refusal_propagates(run_cell("write-status", "looper"))
