"""The claude-code adapter's pure parts: its command line, its environment (the gateway, the
run token, everything but the model call off, HOME in the sandbox folder) and what it reads
from Claude Code's stream-json output. The runs themselves are the conformance suite's."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def adapter():
    # Importing the kit sets the harness's offline environment in this process (OFFLINE_ENV:
    # OTEL_SDK_DISABLED among it) and adds modules: both are put back, so no later test of this
    # worker runs in an adapter's environment.
    environ, modules = dict(os.environ), set(sys.modules)
    sys.path.insert(0, str(ROOT / "frameworks" / "_harness"))
    try:
        spec = importlib.util.spec_from_file_location(
            "claude_code_adapter", ROOT / "frameworks" / "claude-code" / "adapter.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "frameworks" / "_harness"))
        os.environ.clear()
        os.environ.update(environ)
        for name in set(sys.modules) - modules:
            del sys.modules[name]


class Rec:
    def __init__(self):
        self.events = []

    def model_call(self, agent, model, usage=None):
        self.events.append(("model_call", model, usage))

    def tool_call(self, agent, tool, args):
        self.events.append(("tool_call", tool, args))


CTL = {
    "model": "agent-model",
    "token": "run-token",
    "gateway_url": "http://127.0.0.1:4321/v1",
    "prompt": "--fix it",
    "workspace": "/ws",
}


def test_environment_points_at_the_gateway_with_the_run_token_and_turns_the_rest_off(adapter, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a real key from the driver's environment")
    env = adapter.environment(CTL, "/sandbox/home")
    # The SDK appends /v1/messages itself.
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"
    assert env["ANTHROPIC_API_KEY"] == "run-token"
    assert env["HOME"] == "/sandbox/home" and env["CLAUDE_CONFIG_DIR"].startswith("/sandbox/home/")
    for name in (
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
    ):
        assert env[name] == "1", name
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"


def test_command_is_print_mode_with_its_tools_allowed_and_the_prompt_after_the_options(adapter, monkeypatch):
    monkeypatch.setattr(adapter, "claude_bin", lambda: "/x/claude")
    cmd = adapter.command(CTL)
    assert cmd[:2] == ["/x/claude", "-p"]
    assert cmd[cmd.index("--model") + 1] == "agent-model"
    assert cmd[cmd.index("--permission-mode") + 1] == "dontAsk"
    assert cmd[cmd.index("--allowedTools") + 1] == cmd[cmd.index("--tools") + 1]
    # A prompt starting with a dash is not read as an option.
    assert cmd[-2:] == ["--", "--fix it"]


def _stream(*events) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\nnot json\n"


def test_stream_json_gives_calls_and_the_result_text(adapter):
    rec = Rec()
    out = _stream(
        {"type": "system", "subtype": "init"},
        {
            "type": "assistant",
            "message": {
                "model": "m1",
                "usage": {"input_tokens": 5, "output_tokens": 2},
                "content": [{"type": "tool_use", "name": "Read", "input": {"file_path": "a"}}],
            },
        },
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "x"}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "Done."},
    )
    assert adapter.record_events(rec, "builder", out) == ("Done.", None)
    assert rec.events == [
        ("model_call", "m1", {"prompt_tokens": 5, "completion_tokens": 2}),
        ("tool_call", "Read", {"file_path": "a"}),
    ]


def test_an_error_result_is_returned_as_the_error(adapter):
    out = _stream({"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 500 boom"})
    assert adapter.record_events(Rec(), "builder", out) == (None, "API Error: 500 boom")
    out = _stream({"type": "result", "subtype": "error_max_turns", "is_error": False})
    assert adapter.record_events(Rec(), "builder", out) == (None, "error_max_turns")


SANDBOX = {
    "argv_prefix": ["/bwrap", "--unshare-net", "--", "/py", "/opt/claimgrid/loopback.py", "s", "18080", "--"],
    "workspace": "/workspace",
    "home": "/tmp",
    "gateway_url": "http://127.0.0.1:18080/v1",
    "credential": "claimgrid-placeholder-not-a-credential",
}


def test_inside_the_agent_sandbox_it_runs_behind_the_prefix_on_the_forwarder_with_home_inside(
    adapter, monkeypatch, tmp_path
):
    monkeypatch.setattr(adapter, "claude_bin", lambda: "/x/claude")
    argv, env = adapter.launch({**CTL, "agent_sandbox": {**SANDBOX, "host_home": str(tmp_path)}})
    assert (
        argv[: len(SANDBOX["argv_prefix"])] == SANDBOX["argv_prefix"]
        and argv[len(SANDBOX["argv_prefix"])] == "/x/claude"
    )
    assert "run-token" not in argv and "run-token" not in env.values()  # only the forwarder holds the token
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:18080" and "ANTHROPIC_API_KEY" not in env
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert settings["apiKeyHelper"] == f"printf %s {SANDBOX['credential']}"
    assert env["HOME"] == "/tmp" and env["CLAUDE_CONFIG_DIR"] == "/tmp/.claude" and "PYTHONPATH" not in env
    assert (tmp_path / ".claude").is_dir()  # made on the host side, where the sandbox's HOME is


def test_unguarded_it_runs_as_the_adapters_child_on_the_gateway(adapter, monkeypatch, tmp_path):
    monkeypatch.setattr(adapter, "claude_bin", lambda: "/x/claude")
    monkeypatch.setenv("HOME", str(tmp_path))
    argv, env = adapter.launch({**CTL, "agent_sandbox": None})
    assert argv[0] == "/x/claude" and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"
    assert env["HOME"] == str(tmp_path)
