"""The LangGraph adapter, run for real: its venv, the harness launcher, the real gateway.

Each test is one cell run end to end the way ``runner.run_cell`` runs it (same control
object, same RunScript registration), but the assertions look at the raw evidence:
the workspace, the harness tools channel, the gateway log and the adapter's runtime events.
"""

from __future__ import annotations

import secrets
import subprocess

import pytest

from claimgrid.conditions import load_content_conditions, load_swap_conditions
from claimgrid.runner import AGENT_NAMES, build_prompt
from claimgrid.tasks import build_template, materialise
from claimgrid.venvs import load_venvs
from tests.conftest import ROOT

pytestmark = pytest.mark.frameworks

ENTRY = load_venvs()["langgraph"]  # the driver's own entry: same venv, same adapter path
VENV = ENTRY.venv
READ_TOOLS = {"list_dir", "read_file", "search"}

# The venv is built by tests/conftest.py before any test marked `frameworks` runs.


@pytest.fixture(scope="module")
def gateway():
    from claimgrid.gateway import Gateway

    gw = Gateway()
    gw.start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def launcher():
    from claimgrid.launch import Launcher

    with Launcher({"langgraph": ENTRY}, "warm") as lau:
        yield lau


@pytest.fixture
def run_cell(tmp_path, tasks, gateway, launcher):
    """``run_cell(task_id, model, swap="none") -> dict`` of the run's evidence and workspace."""
    content = load_content_conditions()["clean"]
    swaps = load_swap_conditions()

    def run(task_id: str, model: str, swap: str = "none", max_model_calls: int = 24,
            launcher_override=None) -> dict:
        task = tasks[task_id]
        mode = "fresh" if launcher_override else "warm"
        run_id = f"r-lg-{task_id}-{model}-{swap}-{mode}"
        template = tmp_path / f"tpl-{run_id}"
        build_template(task, content.render(task), template)
        ws, sandbox = tmp_path / f"ws-{run_id}", tmp_path / f"sb-{run_id}"
        materialise(template, ws)
        sandbox.mkdir()
        agent = AGENT_NAMES[task.role]
        token = "cg-" + secrets.token_urlsafe(24)
        from claimgrid.gateway import RunScript

        gateway.register(token, RunScript.for_cell(run_id, task, content, swaps[swap], model, "reader",
                                                   agent, max_model_calls=max_model_calls))
        ctl = {
            "schema": 1, "run_id": run_id, "framework": "langgraph", "task_id": task_id,
            "prompt": build_prompt(task, run_id, agent), "workspace": str(ws), "sandbox": str(sandbox),
            "outcome_path": str(sandbox / "outcome.json"), "gateway_url": gateway.url, "token": token,
            "model": model, "agent_name": agent,
            "tools": ["list_dir", "read_file", "search", "write_file", "edit_file", "run_command"],
            "budgets": {"max_model_calls": max_model_calls, "command_timeout_s": 30, "max_output_chars": 16000},
            "timeout_s": 120,
        }
        try:
            res = (launcher_override or launcher).launch("langgraph", ctl, 120)
        finally:
            gw_events, _ = gateway.finish(token)
        assert res.outcome_status == "ok", (res.process_event, res.outcome)
        runtime = res.outcome["events"]
        return {
            "run_id": run_id, "task": task, "ws": ws, "agent": agent, "outcome": res.outcome, "tools": res.tool_events,
            "gateway": gw_events, "runtime": runtime,
            "rt_tools": [e for e in runtime if e["kind"] == "tool_call"],
            "rt_models": [e for e in runtime if e["kind"] == "model_call"],
        }

    return run


def _assert_runtime_matches_tools_channel(r: dict) -> None:
    """Every tool the harness executed appears in the runtime, attributed to the LangGraph agent."""
    assert r["rt_tools"], "no runtime tool calls recorded"
    assert [e["tool"] for e in r["rt_tools"]] == [e["tool"] for e in r["tools"]]
    assert [e["args"] for e in r["rt_tools"]] == [e["args"] for e in r["tools"]]
    for e in r["rt_tools"]:
        assert e["agent"] == r["agent"]
        assert e["agent_source"] == "metadata.lc_agent_name"  # LangGraph's attribution, not the fallback


def test_diligent_write_status(run_cell):
    r = run_cell("write-status", "diligent")
    assert r["outcome"]["error"] is None
    for exact in r["task"].spec.expectation.exact_contents:
        assert (r["ws"] / exact.path).read_text().strip() == exact.content
    _assert_runtime_matches_tools_channel(r)
    assert any(e["category"] == "write" and e["changed_workspace"] for e in r["tools"])
    assert len(r["rt_models"]) == len(r["gateway"])
    assert {e["model"] for e in r["rt_models"]} == {"diligent"}
    assert "trace:" in r["outcome"]["final_text"]
    versions = r["outcome"]["versions"]
    assert versions["langgraph"] and versions["litellm"] == "1.110.2"
    assert versions["retries"]["chat_litellm_max_retries"] == 1


def test_diligent_fix_float_add(run_cell):
    r = run_cell("fix-float-add", "diligent")
    assert r["outcome"]["error"] is None
    cmd = r["task"].test_command()
    proc = subprocess.run(cmd, cwd=r["ws"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_runtime_matches_tools_channel(r)
    assert {e["tool"] for e in r["rt_tools"]} & {"edit_file", "write_file"}


def test_narrator_calls_no_tool(run_cell):
    r = run_cell("fix-float-add", "narrator")
    assert r["outcome"]["error"] is None
    assert r["rt_tools"] == [] and r["tools"] == []
    assert r["rt_models"] and "DONE" in r["outcome"]["final_text"]


def test_reader_only_reads(run_cell):
    r = run_cell("fix-float-add", "reader")
    assert r["outcome"]["error"] is None
    _assert_runtime_matches_tools_channel(r)
    assert {e["tool"] for e in r["rt_tools"]} <= READ_TOOLS
    assert {e["category"] for e in r["tools"]} == {"read"}


def test_reported_swap_is_visible_in_runtime_model_names(run_cell):
    """ChatLiteLLM's own response_metadata names the configured model; the adapter keeps
    the response's model field, so a reported substitute shows in the runtime channel."""
    r = run_cell("write-status", "diligent", swap="reported")
    served = [e["reported_model"] for e in r["gateway"]]
    assert served[0] == "diligent" and served[-1] == "reader"  # run_cell's substitute
    assert [e["model"] for e in r["rt_models"]] == served
    assert {e["transcript_model"] for e in r["rt_models"]} == {"openai/diligent"}


def test_looper_hits_the_recursion_limit_and_raises(run_cell):
    r = run_cell("fix-float-add", "looper", max_model_calls=4)
    assert r["outcome"]["final_text"] is None
    assert r["outcome"]["error"]["type"] == "GraphRecursionError"
    assert len(r["gateway"]) == 4


# What LangGraph does with faults (DESIGN section 4: a real finding, pinned here so a
# version bump that changes it fails loudly instead of silently changing the ledger).


def test_malformed_tool_args_end_the_run_quietly(run_cell):
    """ChatLiteLLM files unparseable arguments under invalid_tool_calls; create_agent only
    routes on tool_calls, so the loop ends after one model call with an empty final text
    and no error: nothing is executed, nothing is raised, the model never hears of it."""
    r = run_cell("fix-float-add", "malformed")
    assert len(r["gateway"]) == 1 and r["gateway"][0]["tool_calls"]
    assert r["tools"] == [] and r["rt_tools"] == []
    assert r["rt_models"][0]["invalid_tool_calls"][0]["name"] == r["gateway"][0]["tool_calls"][0]["name"]
    assert r["outcome"]["error"] is None and r["outcome"]["final_text"] == ""


def test_unknown_tool_is_answered_not_raised(run_cell):
    """ToolNode answers a call to an unknown tool with an error ToolMessage and never
    dispatches it: no harness execution, a runtime error event, and the run goes on to
    whatever the model reports next (here: DONE)."""
    r = run_cell("fix-float-add", "unknown-tool")
    asked = r["gateway"][0]["tool_calls"][0]["name"]
    assert r["tools"] == [] and r["rt_tools"] == []
    errors = [e for e in r["runtime"] if e["kind"] == "error"]
    assert [e["tool"] for e in errors] == [asked] and "not a valid tool" in errors[0]["message"]
    assert any(asked in t for t in r["gateway"][1]["tool_results"])
    assert r["outcome"]["error"] is None and "DONE" in r["outcome"]["final_text"]


def test_bound_swap_503_raises_after_one_attempt(run_cell):
    r = run_cell("write-status", "diligent", swap="bound")
    assert [e["status"] for e in r["gateway"]][-1] == 503
    assert [e["status"] for e in r["gateway"]].count(503) == 1  # no hidden HTTP retries
    assert r["outcome"]["final_text"] is None
    assert r["outcome"]["error"]["type"] == "ServiceUnavailableError"
    assert [e["type"] for e in r["runtime"] if e["kind"] == "error"] == ["ServiceUnavailableError"]


def test_fresh_process_gives_the_same_runtime_evidence(run_cell):
    """The reference isolation mode (a fresh interpreter) sees what a forked child sees."""
    from claimgrid.launch import Launcher

    warm = run_cell("write-status", "diligent")
    with Launcher({"langgraph": ENTRY}, "fresh") as fresh_launcher:
        fresh = run_cell("write-status", "diligent", launcher_override=fresh_launcher)
    assert fresh["outcome"]["harness"]["isolation"] == "fresh"
    keys = ("kind", "agent", "agent_source", "tool", "args", "model", "transcript_model")
    strip = lambda evs: [{k: e.get(k) for k in keys} for e in evs]  # noqa: E731
    assert strip(fresh["runtime"]) == strip(warm["runtime"])
    assert (fresh["outcome"]["final_text"].replace(fresh["run_id"], "<run>")
            == warm["outcome"]["final_text"].replace(warm["run_id"], "<run>"))
