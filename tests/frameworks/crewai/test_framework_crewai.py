"""The CrewAI adapter, run for real: its venv, the harness launcher, the gateway's reference models.

Each run goes through ``claimgrid.launch.Launcher`` (a child forked from the CrewAI warm
parent unless a test asks for a fresh interpreter) against ``claimgrid.gateway.Gateway``;
the workspace is built with ``tasks.build_template`` + ``materialise`` and checked from
outside after the process exits.

The fault tests pin what CrewAI 1.15 itself does with a broken model (findings for the
ledger, not adapter choices): a version that behaves differently fails here on purpose.
"""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from claimgrid.gateway import RunScript
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import TOOL_NAMES, build_template, materialise
from claimgrid.launch import Launcher, adapter_env

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

PROJECT = ROOT / "frameworks" / "crewai"
VENV = ROOT / ".venvs" / "crewai"
TIMEOUT_S = 180

# The venv is built by tests/conftest.py before any test marked `frameworks` runs.


@pytest.fixture(scope="module")
def launcher():
    yield from warm_launcher("crewai")


def _control(run_id, task, ws, sandbox, gateway, token, model) -> dict:  # noqa: F811
    return {
        "schema": 1,
        "run_id": run_id,
        "framework": "crewai",
        "task_id": task.spec.id,
        "prompt": task.spec.prompt,
        "workspace": str(ws),
        "sandbox": str(sandbox),
        "outcome_path": str(sandbox / "outcome.json"),
        "gateway_url": gateway.url,
        "token": token,
        "model": model,
        "agent_name": task.role,
        "tools": list(TOOL_NAMES),
        "budgets": {"max_model_calls": 24, "command_timeout_s": 30, "max_output_chars": 16000},
        "timeout_s": TIMEOUT_S,
        "command_sandbox": None,
    }


@pytest.fixture
def run_cell(tmp_path, tasks, gateway, launcher):  # noqa: F811
    return make_run_cell("crewai", tmp_path, tasks, gateway, launcher, TIMEOUT_S)


def _assert_clean_run(r: dict) -> None:
    assert r["outcome"]["error"] is None, r["outcome"]["error"]
    assert r["process"]["timed_out"] is False
    assert r["outcome"]["versions"]["crewai"] == "1.15.30"
    # CrewAI's native OpenAI provider on the openai SDK: LiteLLM is not in the venv.
    assert "litellm" not in r["outcome"]["versions"]
    assert r["outcome"]["versions"]["openai"]
    assert "OpenAICompletion" in r["outcome"]["versions"]["model_client"]
    # One runtime model_call per gateway exchange, attributed to the CrewAI agent's role,
    # with the model name from the response CrewAI received.
    assert len(r["runtime_models"]) == len(r["gateway"]) > 0
    assert {e["agent"] for e in r["runtime_models"]} == {r["agent_name"]}
    assert [e["model"] for e in r["runtime_models"]] == [g["reported_model"] for g in r["gateway"]]
    assert [e["usage"]["prompt_tokens"] for e in r["runtime_models"]] == [
        g["usage"]["prompt_tokens"] for g in r["gateway"]
    ]
    final = r["outcome"]["final_text"]
    assert final and [m["text"] for m in r["runtime_messages"]] == [final]
    assert r["runtime_errors"] == []


def _assert_native_function_calling(r: dict) -> None:
    """Native tool calls, not text ReAct: the model answered with structured tool_calls
    and CrewAI's first prompt stays small (ReAct would inline every tool in ~7x the text)."""
    assert any(g["tool_calls"] for g in r["gateway"])
    assert r["gateway"][0]["usage"]["prompt_tokens"] < 600


def test_diligent_write_status_writes_exact_file(run_cell):
    r = run_cell("write-status", "diligent")
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    _assert_native_function_calling(r)
    assert (r["ws"] / "output" / "status.txt").read_bytes() == b"CLAIMGRID_OK"
    assert "write_file" in {e["tool"] for e in r["runtime_tools"]}
    # CrewAI's storage stayed in the run's sandbox.
    assert list(r["sandbox"].rglob("latest_kickoff_task_outputs.db"))
    assert not list(r["ws"].rglob("*.db"))


def test_diligent_fix_float_add_makes_tests_pass(run_cell):
    r = run_cell("fix-float-add", "diligent")
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    assert any(e["changed_workspace"] for e in r["tools"])
    assert "run_command" in {e["tool"] for e in r["runtime_tools"]}
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


def test_reported_swap_is_visible_in_the_runtime(run_cell):
    r = run_cell("write-status", "diligent", swap="reported")
    assert r["outcome"]["error"] is None, r["outcome"]["error"]
    swapped = [g for g in r["gateway"] if g["swap"] == "reported"]
    assert swapped
    runtime_names = [e["model"] for e in r["runtime_models"]]
    assert runtime_names == [g["reported_model"] for g in r["gateway"]]
    assert swapped[0]["reported_model"] in runtime_names and "diligent" in runtime_names


# ------------------------------------------------------------- CrewAI with faults


def test_bound_outage_reexecutes_the_task_then_propagates(run_cell):
    """A 503 from the endpoint: the openai SDK raises (max_retries=0: one HTTP attempt),
    CrewAI's Agent re-executes the task max_retry_limit times (an openai SDK error is
    not a LiteLLM one, so it does not bypass the loop), each attempt's first model call
    is refused again, and kickoff raises the SDK's error."""
    r = run_cell("write-status", "diligent", swap="bound")
    assert r["outcome"]["error"]["type"] == "InternalServerError"
    assert r["outcome"]["final_text"] is None
    limit = r["outcome"]["versions"]["retries"]["crewai_agent_max_retry_limit"]
    refused = [g for g in r["gateway"] if g["status"] != 200]
    assert len(refused) == 1 + limit and {g["status"] for g in refused} == {503}
    types = [e["type"] for e in r["runtime_errors"]]
    assert types.count("InternalServerError") == 1 + limit
    assert types.count("agent_execution_error") == 1 + limit


def test_transient_500_is_recovered_by_task_reexecution(run_cell):
    """One 500: CrewAI's Agent re-executes the task from its first prompt (its own retry,
    max_retry_limit), and the re-executed task finishes: the run ends with the model's
    report, the failed attempt recorded as runtime errors."""
    r = run_cell("write-status", "transient-500")
    assert r["outcome"]["error"] is None
    failed = [g for g in r["gateway"] if g["status"] != 200]
    assert [g["status"] for g in failed] == [500]
    types = [e["type"] for e in r["runtime_errors"]]
    assert types.count("InternalServerError") == 1 and "agent_execution_error" in types
    # The re-executed task starts over: its first prompt is the task's first prompt again.
    ok = [g for g in r["gateway"] if g["status"] == 200]
    assert ok[0]["usage"]["prompt_tokens"] in [g["usage"]["prompt_tokens"] for g in ok[1:]]
    assert "status: DONE" in r["outcome"]["final_text"]


def test_malformed_tool_json_is_never_executed_and_run_reports_done(run_cell):
    """CrewAI refuses unparseable arguments (the tool is not called, the model is told),
    records a tool failure with policy WARN, and the run ends normally with the
    model's DONE: a false claim CrewAI itself does not stop."""
    r = run_cell("write-status", "malformed")
    assert r["outcome"]["error"] is None
    malformed_calls = [g for g in r["gateway"] if g["tool_calls"]]
    assert len(malformed_calls) == 3
    assert r["tools"] == [] and r["runtime_tools"] == []
    failures = [e for e in r["runtime_errors"] if e["type"] == "tool_failure_detected"]
    assert len(failures) == 3 and all("parse tool arguments" in e["message"] for e in failures)
    assert "status: DONE" in r["outcome"]["final_text"]
    assert not (r["ws"] / "output" / "status.txt").exists()


def test_unknown_tool_is_answered_by_crewai_and_run_reports_done(run_cell):
    """CrewAI answers an unknown tool name itself ("Tool not found"); the harness tool
    layer never sees the call, so only the runtime and the gateway record it."""
    r = run_cell("write-status", "unknown-tool")
    assert r["outcome"]["error"] is None
    assert r["tools"] == []
    [call] = r["runtime_tools"]
    assert call["tool"] == "deploy_to_production" and call["agent"] == r["agent_name"]
    assert call["failure"].startswith("unknown_tool")
    assert "status: DONE" in r["outcome"]["final_text"]


def test_looper_is_stopped_by_crewai_repeat_detection(run_cell):
    """Five identical calls with an identical result: CrewAI raises
    ToolExecutionFailedError, which kickoff propagates (an adapter error, not DONE)."""
    r = run_cell("write-status", "looper")
    assert r["outcome"]["error"]["type"] == "ToolExecutionFailedError"
    assert r["outcome"]["final_text"] is None
    stop = r["outcome"]["versions"]["retries"]["crewai_repeated_tool_call_stop"]
    assert len(r["tools"]) == len(r["runtime_tools"]) == stop
    assert {e["tool"] for e in r["tools"]} == {"list_dir"}
    assert len(r["gateway"]) == stop


# ------------------------------------------------------------- isolation and network


def test_fresh_interpreter_run_exits_and_matches_warm(run_cell):
    """Fresh mode leaves through a normal interpreter exit (CrewAI's atexit bus shutdown
    runs in a non-forked process) and gives the same evidence as a forked child."""
    with Launcher({"crewai": entry("crewai")}, "fresh") as fresh:
        r = run_cell("write-status", "diligent", via=fresh)
    _assert_clean_run(r)
    assert_runtime_matches_harness(r)
    assert r["process"]["isolation"] == "fresh" and r["process"]["exit_code"] == 0
    assert (r["ws"] / "output" / "status.txt").read_bytes() == b"CLAIMGRID_OK"


PROBE = r"""
import json, os, sys
seen = []
def hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in ("127.0.0.1", "::1"):
        seen.append(f"connect {args[1][0]}")
    elif event == "socket.getaddrinfo" and args[0] not in ("127.0.0.1", "localhost", "::1"):
        seen.append(f"resolve {args[0]}")
sys.addaudithook(hook)
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import threading
import adapter
adapter.preload()
threads = [t.name for t in threading.enumerate()]
from harness_runtime import RuntimeRecorder
from harness_tools import ToolChannel, make_tools
ctl = json.loads(sys.stdin.read())
# The adapter's model against what a CrewAI user writes for an OpenAI-compatible endpoint.
import kit
from crewai import LLM
user = LLM(model="openai/" + ctl["model"], base_url=ctl["gateway_url"], api_key=ctl["token"], stream=False,
           temperature=0, timeout=kit.call_timeout(ctl), max_retries=0)
ours = adapter._gateway_llm(ctl, None)
probe_messages = [{"role": "user", "content": "x"}]
same = {"class": isinstance(ours, type(user)), "fields": user.model_dump() == ours.model_dump(),
        "request": user._prepare_completion_params(probe_messages) == ours._prepare_completion_params(probe_messages),
        "client": user._get_client_params() == ours._get_client_params()}
channel = ToolChannel(None)
text = adapter.run(ctl, make_tools(ctl, channel), RuntimeRecorder())
print(json.dumps({"network": seen, "final": text, "tools": len(channel.events), "threads": threads,
                  "same_as_llm": same}))
sys.stdout.flush()
os._exit(0)
"""


def test_crewai_never_reaches_the_network(tmp_path, tasks, gateway):  # noqa: F811
    """Import, preload and a whole run with an audit hook: no non-loopback socket is
    opened or resolved (telemetry, tracing, cost map, tiktoken encodings all stay local),
    preload leaves the process single-threaded (the warm parent forks after it), and
    the run's files land in the sandbox, not in the HOME the process started with. The
    adapter's model is what ``crewai.LLM("openai/<model>", base_url=...)`` builds (same
    class, fields, request parameters and client parameters; the subclass only observes
    and states the context window)."""
    task = tasks["write-status"]
    clean = load_content_conditions()["clean"]
    template, ws, sandbox, home = (tmp_path / n for n in ("template", "ws", "sandbox", "home"))
    build_template(task, clean.render(task), template)
    materialise(template, ws)
    sandbox.mkdir()
    home.mkdir()
    token = "tok-" + secrets.token_hex(16)
    gateway.register(
        token, RunScript.for_cell("r-net", task, clean, load_swap_conditions()["none"], "diligent", "reader", task.role)
    )
    ctl = _control("r-net", task, ws, sandbox, gateway, token, "diligent")
    # The environment the launcher gives a CrewAI process (the harness's table and CrewAI's
    # own env from venvs.toml: telemetry off, CREWAI_STORAGE_DIR in the sandbox), with HOME
    # the folder the process starts in.
    python = str(VENV / "bin" / "python")
    env = adapter_env(entry("crewai"), str(home), python, str(sandbox))
    proc = subprocess.run(
        [python, "-c", PROBE, str(PROJECT), str(ROOT / "frameworks" / "_harness")],
        input=json.dumps(ctl),
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
    )
    gateway.finish(token)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["network"] == []
    assert report["threads"] == ["MainThread"]
    assert report["same_as_llm"] == {"class": True, "fields": True, "request": True, "client": True}
    assert report["tools"] > 0 and "status: DONE" in report["final"]
    # Import-time files (CrewAI's credentials key) may land in the starting HOME; the
    # run's own files (task outputs db) must be in the sandbox.
    assert not list(home.rglob("*.db"))
    assert list(sandbox.rglob("latest_kickoff_task_outputs.db"))
