"""``grid.py check --hook claude-code`` as the real Claude Code's Stop hook (its ``--settings``
``hooks.Stop``), on the grid's gateway with a reference model, in a repository that holds its
expectation (``.claimgrid/expectation.toml``): ``narrator`` reports DONE with no tool call, the
hook blocks the stop and Claude Code sends the reason to the model in its next request (the
gateway's record), and the stop after that goes through (``stop_hook_active``); ``diligent``
does the work and its stop goes through at once. Two short runs; Claude Code not in ``--bare``
mode (which runs no hooks), so with its session transcript, the file the hook reads."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid

from claimgrid.execute.runner import build_prompt
from claimgrid.gateway import Gateway, RunScript
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import GIT_ENV, in_suite, load_tasks
from claimgrid.inputs.venvs import ensure_venvs, load_venvs
from claimgrid.reference.script import CallLimits
from claimgrid.reference.tool_table import load_table

from tests.conftest import ROOT

AGENT = "claude-code"
# Claude Code lays out its request differently for a model name it does not know (a system-role
# message the gateway's Messages dialect refuses): the run asks for a name it knows; the gateway
# serves the token's reference model whatever name is asked for, and records both.
ASKED_MODEL = "claude-sonnet-4-5"


def _run(tmp_path, model: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """(the hook's log lines, the gateway's exchanges, its raw requests, Claude Code's stream-json
    events) of one run."""
    entry = load_venvs()[AGENT]
    ensure_venvs({AGENT: entry})
    tasks = load_tasks()
    task = next(
        t for t in in_suite(tasks, "default").values() if t.role == "builder" and not t.spec.expectation.evidence
    )
    content = next(c for c in load_content_conditions().values() if c.carries is None)
    swap = next(s for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    ws, home, log = tmp_path / model / "ws", tmp_path / model / "home", tmp_path / model / "hook.log"
    shutil.copytree(task.repo, ws)
    (ws / task.spec.content_slot).write_text(content.render(task))
    (ws / ".claimgrid").mkdir()
    shutil.copy(task.repo.parent / "task.toml", ws / ".claimgrid" / "expectation.toml")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=ws, env=GIT_ENV, check=True, capture_output=True)
    home.mkdir(parents=True)
    delegation = f"d-{uuid.uuid4().hex[:8]}"
    table = load_table(entry.tools_table)
    script = RunScript.for_cell(
        delegation, task, content, swap, model, "reader", "agent", limits=CallLimits(max_model_calls=12)
    ).with_tool_table(table)
    hook = " ".join(
        shlex.quote(str(a)) for a in (sys.executable, ROOT / "grid.py", "check", "--hook", AGENT, "--log", log)
    )
    settings = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook, "timeout": 120}]}]}}
    claude = entry.agent_bin
    with Gateway() as gw:
        token = f"tok-{uuid.uuid4().hex}"
        gw.register(token, script)
        env = {
            **os.environ,
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": str(gw.url).rstrip("/").removesuffix("/v1"),
            "ANTHROPIC_API_KEY": token,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "NO_COLOR": "1",
        }
        argv = [
            str(claude), "-p", "--output-format", "stream-json", "--verbose", "--model", ASKED_MODEL,
            "--tools", "Read,Edit,Bash", "--allowedTools", "Read,Edit,Bash", "--permission-mode", "dontAsk",
            "--strict-mcp-config", "--settings", json.dumps(settings), "--", build_prompt(task, delegation, "agent"),
        ]  # fmt: skip
        proc = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
        exchanges, raw = gw.finish(token)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stream = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return lines, [e for e in exchanges if e.get("kind") == "exchange"], raw, stream


def test_the_hook_blocks_a_narrated_done_and_claude_code_gives_the_model_the_reason(tmp_path):
    lines, exchanges, raw, stream = _run(tmp_path, "narrator")
    assert [line["decision"] for line in lines] == ["block", "allow"], lines
    blocked, second = lines
    assert blocked["transcript_form"] == "claude-code session"
    assert blocked["verdict"]["claim_verdict"] == "narration only"
    assert blocked["verdict"]["outcome"] == "EMPTY_DIFF" and blocked["verdict"]["claim_vs_outcome"] == "FALSE_SUCCESS"
    assert "stop_hook_active" in second["why"]  # never a loop: the second stop goes through unchecked
    # Claude Code sent the reason to the model: the second request's conversation carries it
    assert len(exchanges) == 2 and all(e["status"] == 200 for e in exchanges)
    requests = [json.dumps(r.get("dialect_request") or r.get("request")) for r in raw]
    assert "claimgrid claim check" not in requests[0] and "claimgrid claim check" in requests[1]
    fed = [
        block.get("text", "")
        for e in stream
        if e.get("type") == "user"
        for block in (e.get("message") or {}).get("content") or []
        if isinstance(block, dict)
    ]
    assert any("claimgrid claim check" in t and "narration only" in t for t in fed), fed


def test_the_hook_lets_the_stop_of_a_diligent_run_through(tmp_path):
    lines, exchanges, raw, _ = _run(tmp_path, "diligent")
    assert [line["decision"] for line in lines] == ["allow"], lines
    verdict = lines[0]["verdict"]
    assert (verdict["claim_verdict"], verdict["outcome"], verdict["claim_vs_outcome"]) == (
        "consistent",
        "PASS",
        "TRUE_SUCCESS",
    )
    assert not any("claimgrid claim check" in json.dumps(r) for r in raw)
