"""The LangGraph adapter, run for real: its venv, the harness launcher, the real gateway.

Each test is one cell run end to end the way ``runner.run_cell`` runs it (same control
object, same RunScript registration), but the assertions look at the raw evidence:
the workspace, the harness tools channel, the gateway log and the adapter's runtime events.
"""

from __future__ import annotations

import pytest

from claimgrid.launch import Launcher

from tests.framework_support import READ_TOOLS, assert_task_tests_pass, entry, gateway, make_run_cell, warm_launcher  # noqa: F401

pytestmark = pytest.mark.frameworks

ENTRY = entry("langgraph")


@pytest.fixture(scope="module")
def launcher():
    yield from warm_launcher("langgraph")


@pytest.fixture
def run_cell(tmp_path, tasks, gateway, launcher):  # noqa: F811
    return make_run_cell("langgraph", tmp_path, tasks, gateway, launcher, 120)


def _assert_runtime_matches_tools_channel(r: dict) -> None:
    """Every tool the harness executed appears in the runtime, attributed to the LangGraph agent."""
    assert r["runtime_tools"], "no runtime tool calls recorded"
    assert [e["tool"] for e in r["runtime_tools"]] == [e["tool"] for e in r["tools"]]
    assert [e["args"] for e in r["runtime_tools"]] == [e["args"] for e in r["tools"]]
    for e in r["runtime_tools"]:
        assert e["agent"] == r["agent_name"]
        assert e["agent_source"] == "metadata.lc_agent_name"  # LangGraph's attribution, not the fallback


def test_diligent_write_status(run_cell):
    r = run_cell("write-status", "diligent")
    assert r["outcome"]["error"] is None
    for exact in r["task"].spec.expectation.exact_contents:
        assert (r["ws"] / exact.path).read_text().strip() == exact.content
    _assert_runtime_matches_tools_channel(r)
    assert any(e["category"] == "write" and e["changed_workspace"] for e in r["tools"])
    assert len(r["runtime_models"]) == len(r["gateway"])
    assert {e["model"] for e in r["runtime_models"]} == {"diligent"}
    assert "trace:" in r["outcome"]["final_text"]
    versions = r["outcome"]["versions"]
    assert versions["langgraph"] and versions["langchain-openai"] and "litellm" not in versions
    assert versions["retries"]["chat_openai_max_retries"] == 0
    assert versions["retries"]["litellm_num_retries"] is None  # LiteLLM is not in this venv
    assert versions["model_client"].startswith("langchain-openai ChatOpenAI")


def test_diligent_fix_float_add(run_cell):
    r = run_cell("fix-float-add", "diligent")
    assert r["outcome"]["error"] is None
    assert_task_tests_pass(r)
    _assert_runtime_matches_tools_channel(r)
    assert {e["tool"] for e in r["runtime_tools"]} & {"edit_file", "write_file"}


def test_narrator_calls_no_tool(run_cell):
    r = run_cell("fix-float-add", "narrator")
    assert r["outcome"]["error"] is None
    assert r["runtime_tools"] == [] and r["tools"] == []
    assert r["runtime_models"] and "DONE" in r["outcome"]["final_text"]


def test_reader_only_reads(run_cell):
    r = run_cell("fix-float-add", "reader")
    assert r["outcome"]["error"] is None
    _assert_runtime_matches_tools_channel(r)
    assert {e["tool"] for e in r["runtime_tools"]} <= READ_TOOLS
    assert {e["category"] for e in r["tools"]} == {"read"}


def test_reported_swap_is_visible_in_runtime_model_names(run_cell):
    """ChatOpenAI's response_metadata["model_name"] is the response's model field, so a
    reported substitute shows in the runtime channel and in LangChain's own transcript."""
    r = run_cell("write-status", "diligent", swap="reported")
    served = [e["reported_model"] for e in r["gateway"]]
    assert served[0] == "diligent" and served[-1] == "reader"  # run_cell's substitute
    assert [e["model"] for e in r["runtime_models"]] == served
    assert [e["transcript_model"] for e in r["runtime_models"]] == served


def test_looper_hits_the_recursion_limit_and_raises(run_cell):
    r = run_cell("fix-float-add", "looper", max_model_calls=4)
    assert r["outcome"]["final_text"] is None
    assert r["outcome"]["error"]["type"] == "GraphRecursionError"
    assert len(r["gateway"]) == 4


# What LangGraph does with faults (docs/DESIGN.md: a real finding, pinned here so a
# version bump that changes it fails loudly instead of silently changing the ledger).


def test_malformed_tool_args_end_the_run_quietly(run_cell):
    """ChatOpenAI files unparseable arguments under invalid_tool_calls; create_agent only
    routes on tool_calls, so the loop ends after one model call with an empty final text
    and no error: nothing is executed, nothing is raised, the model never hears of it."""
    r = run_cell("fix-float-add", "malformed")
    assert len(r["gateway"]) == 1 and r["gateway"][0]["tool_calls"]
    assert r["tools"] == [] and r["runtime_tools"] == []
    assert r["runtime_models"][0]["invalid_tool_calls"][0]["name"] == r["gateway"][0]["tool_calls"][0]["name"]
    assert r["outcome"]["error"] is None and r["outcome"]["final_text"] == ""


def test_unknown_tool_is_answered_not_raised(run_cell):
    """ToolNode answers a call to an unknown tool with an error ToolMessage and never
    dispatches it: no harness execution, a runtime error event, and the run goes on to
    whatever the model reports next (here: DONE)."""
    r = run_cell("fix-float-add", "unknown-tool")
    asked = r["gateway"][0]["tool_calls"][0]["name"]
    assert r["tools"] == [] and r["runtime_tools"] == []
    errors = [e for e in r["runtime"] if e["kind"] == "error"]
    assert [e["tool"] for e in errors] == [asked] and "not a valid tool" in errors[0]["message"]
    assert any(asked in t for t in r["gateway"][1]["tool_results"])
    assert r["outcome"]["error"] is None and "DONE" in r["outcome"]["final_text"]


def test_bound_swap_503_raises_after_one_attempt(run_cell):
    """The openai SDK makes one attempt (max_retries=0) and raises InternalServerError;
    ChatOpenAI re-raises it as its own OpenAIAPIError (a subclass), which propagates."""
    r = run_cell("write-status", "diligent", swap="bound")
    assert [e["status"] for e in r["gateway"]][-1] == 503
    assert [e["status"] for e in r["gateway"]].count(503) == 1  # no hidden HTTP retries
    assert r["outcome"]["final_text"] is None
    assert r["outcome"]["error"]["type"] == "OpenAIAPIError"
    assert [e["type"] for e in r["runtime"] if e["kind"] == "error"] == ["OpenAIAPIError"]


def test_fresh_process_gives_the_same_runtime_evidence(run_cell):
    """The reference isolation mode (a fresh interpreter) sees what a forked child sees."""
    warm = run_cell("write-status", "diligent")
    with Launcher({"langgraph": ENTRY}, "fresh") as fresh_launcher:
        fresh = run_cell("write-status", "diligent", via=fresh_launcher)
    assert fresh["outcome"]["harness"]["isolation"] == "fresh"
    keys = ("kind", "agent", "agent_source", "tool", "args", "model", "transcript_model")
    strip = lambda evs: [{k: e.get(k) for k in keys} for e in evs]  # noqa: E731
    assert strip(fresh["runtime"]) == strip(warm["runtime"])
    assert fresh["outcome"]["final_text"].replace(fresh["run_id"], "<run>") == warm["outcome"]["final_text"].replace(
        warm["run_id"], "<run>"
    )
