"""Shared pieces of the per-framework tests: one cell run for real, the way runner.run_cell
runs it (same control object, same RunScript registration), returning the raw evidence
so each framework's test can look at the workspace, the tools channel, the gateway log
and the adapter's runtime events."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from claimgrid.execute.runner import AGENT_NAMES, build_prompt
from claimgrid.gateway import Gateway, RunScript
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import TOOL_NAMES, build_template, materialise
from claimgrid.inputs.venvs import load_venvs
from claimgrid.launch import Launcher
from claimgrid.launch.confine import command_sandbox, hand_over
from claimgrid.reference.script import CallLimits
from claimgrid.sandbox.guard import detect

READ_TOOLS = {"list_dir", "read_file", "search"}

GUARD = detect("auto")  # on wherever namespaces work (CI); the runs are sandboxed as in grid.py


def entry(framework: str):
    """The driver's own venvs.toml entry: same venv, same adapter path as a grid run."""
    return load_venvs()[framework]


@pytest.fixture(scope="module")
def gateway():
    with Gateway() as gw:
        yield gw


def warm_launcher(framework: str):
    """A module-scoped warm Launcher for one framework (use as a fixture body)."""
    with Launcher({framework: entry(framework)}, "warm") as la:
        yield la


def make_run_cell(framework: str, tmp_path, tasks, gateway, launcher, timeout_s: float):
    """``run(task_id, model, swap="none", via=None, max_model_calls=24) -> dict`` of evidence.

    ``via`` runs the cell through another Launcher (e.g. fresh isolation).
    """
    clean = load_content_conditions()["clean"]
    swaps = load_swap_conditions()

    def run(task_id: str, model: str, swap: str = "none", via=None, max_model_calls: int = 24) -> dict:
        task = tasks[task_id]
        mode = "fresh" if via else "warm"
        run_id = f"r-{framework}-{task_id}-{model}-{swap}-{mode}"
        folder = tmp_path / run_id
        template, ws, sandbox = folder / "template", folder / "ws", folder / "sandbox"
        folder.mkdir()
        build_template(task, clean.render(task), template)
        materialise(template, ws)
        hand_over(GUARD, ws)  # as grid.py does: the agent's commands run in the guard
        sandbox.mkdir()
        agent = AGENT_NAMES[task.role]
        token = "cg-" + secrets.token_urlsafe(24)
        gateway.register(
            token,
            RunScript.for_cell(
                run_id,
                task,
                clean,
                swaps[swap],
                model,
                "reader",
                agent,
                limits=CallLimits(max_model_calls=max_model_calls),
            ),
        )
        ctl = {
            "schema": 1,
            "run_id": run_id,
            "framework": framework,
            "task_id": task_id,
            "prompt": build_prompt(task, run_id, agent),
            "workspace": str(ws),
            "sandbox": str(sandbox),
            "outcome_path": str(sandbox / "outcome.json"),
            "gateway_url": gateway.url,
            "token": token,
            "model": model,
            "agent_name": agent,
            "tools": list(TOOL_NAMES),
            "budgets": {"max_model_calls": max_model_calls, "command_timeout_s": 30, "max_output_chars": 16000},
            "timeout_s": timeout_s,
            "command_sandbox": command_sandbox(GUARD, ws, task.python, 30),
        }
        try:
            res = (via or launcher).launch(framework, ctl, timeout_s)
        finally:
            exchanges, _raw = gateway.finish(token)
        assert res.outcome_status == "ok", (res.process_event, res.outcome)
        runtime = res.outcome["events"]
        return {
            "run_id": run_id,
            "task": task,
            "ws": ws,
            "sandbox": sandbox,
            "agent_name": agent,
            "outcome": res.outcome,
            "process": res.process_event,
            "tools": res.tool_events,
            "gateway": exchanges,
            "runtime": runtime,
            "runtime_tools": [e for e in runtime if e["kind"] == "tool_call"],
            "runtime_models": [e for e in runtime if e["kind"] == "model_call"],
            "runtime_messages": [e for e in runtime if e["kind"] == "message"],
            "runtime_errors": [e for e in runtime if e["kind"] == "error"],
        }

    return run


def assert_runtime_matches_harness(r: dict) -> None:
    """The tools the framework's runtime says it called are the ones the harness tool layer
    executed, in order, and all are attributed to the framework's agent."""
    assert r["runtime_tools"], "no runtime tool calls recorded"
    assert [(e["tool"], e["args"]) for e in r["runtime_tools"]] == [(e["tool"], e["args"]) for e in r["tools"]]
    assert {e["agent"] for e in r["runtime_tools"]} == {r["agent_name"]}


def assert_task_tests_pass(r: dict) -> None:
    """The harness re-runs the task's own test command in the workspace the run left."""
    proc = subprocess.run(r["task"].test_command(), cwd=r["ws"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def assert_no_tool_calls(r: dict) -> None:
    assert r["runtime_tools"] == [] and r["tools"] == []


def assert_read_only(r: dict) -> None:
    """Tool calls happened, all of them reads, and none changed the workspace."""
    assert r["runtime_tools"], "reader reads before it reports"
    assert {e["tool"] for e in r["runtime_tools"]} <= READ_TOOLS
    assert not any(e["changed_workspace"] for e in r["tools"])
