"""The codex adapter's pure parts: its config (the gateway as its provider; its own sandbox
``workspace-write`` unguarded, off inside the harness's agent sandbox) and its command line.
The runs themselves are the conformance suite's."""

from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CTL = {
    "model": "agent-model",
    "token": "run-token",
    "gateway_url": "http://127.0.0.1:4321/v1",
    "prompt": "fix it",
    "workspace": "/host/ws",
    "budgets": {"model_call_timeout_s": 15.0},
}
SANDBOX = {
    "argv_prefix": ["/bwrap", "--unshare-net", "--", "/py", "/opt/claimgrid/loopback.py", "s", "18080", "--"],
    "workspace": "/workspace",
    "home": "/tmp",
    "gateway_url": "http://127.0.0.1:18080/v1",
}


@pytest.fixture(scope="module")
def adapter():
    # As tests/unit/frameworks/test_claude_code_adapter.py: the kit's environment and modules go back.
    environ, modules = dict(os.environ), set(sys.modules)
    sys.path.insert(0, str(ROOT / "frameworks" / "_harness"))
    try:
        spec = importlib.util.spec_from_file_location("codex_adapter", ROOT / "frameworks" / "codex" / "adapter.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "frameworks" / "_harness"))
        os.environ.clear()
        os.environ.update(environ)
        for name in set(sys.modules) - modules:
            del sys.modules[name]


def test_unguarded_codex_keeps_its_own_sandbox_and_talks_to_the_gateway(adapter):
    config = tomllib.loads(adapter.config_toml(CTL))
    assert config["sandbox_mode"] == "workspace-write"
    assert config["sandbox_workspace_write"]["writable_roots"] == ["/host/ws/.git"]
    assert config["model_providers"]["claimgrid"]["base_url"] == "http://127.0.0.1:4321/v1"


def test_inside_the_agent_sandbox_its_own_sandbox_is_off_and_the_forwarder_is_its_provider(adapter):
    config = tomllib.loads(adapter.config_toml({**CTL, "agent_sandbox": SANDBOX}))
    assert config["sandbox_mode"] == "danger-full-access"
    assert config["model_providers"]["claimgrid"]["base_url"] == "http://127.0.0.1:18080/v1"
    assert config["sandbox_workspace_write"]["writable_roots"] == ["/workspace/.git"]


def test_inside_the_agent_sandbox_it_runs_node_behind_the_prefix_with_home_inside(adapter, monkeypatch, tmp_path):
    monkeypatch.setattr(adapter, "codex_bin", lambda: "/venv/npm/node_modules/.bin/codex")
    monkeypatch.setattr(adapter, "node_dir", lambda: "/venv/node/bin")
    cmd, env, last = adapter.launch({**CTL, "agent_sandbox": {**SANDBOX, "host_home": str(tmp_path)}})
    n = len(SANDBOX["argv_prefix"])
    assert cmd[:n] == SANDBOX["argv_prefix"] and cmd[n].endswith("/node") and "run-token" not in cmd
    assert (
        cmd[cmd.index("--cd") + 1] == "/workspace"
        and cmd[cmd.index("--output-last-message") + 1] == "/tmp/last-message.txt"
    )
    assert last == str(tmp_path / "last-message.txt")  # read back on the host side
    assert env["HOME"] == "/tmp" and env["CODEX_HOME"] == "/tmp/.codex" and env["CLAIMGRID_RUN_TOKEN"] == "run-token"
    written = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert written["sandbox_mode"] == "danger-full-access"
