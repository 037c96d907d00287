"""The ``claude-code`` adapter: Anthropic's Claude Code (``claude -p``) run as one grid run, on the kit.

Claude Code brings its own tools (in ``--bare`` mode: Read, Edit, Bash), so the harness tools
handed to ``run`` are not used: what the model asked for and what Claude Code sent back is in
the gateway's exchanges, and the workspace before/after is the verifier's (docs/CONTRACTS.md,
"Agents with their own tools"). Per run, the adapter

* runs ``claude -p`` (print mode: one prompt, no terminal, no questions) in the workspace with
  ``--bare`` (no hooks, plugins, CLAUDE.md discovery, background prefetches or keychain; the
  key is exactly ``ANTHROPIC_API_KEY`` or an ``apiKeyHelper``), no session files, no MCP servers, only those three
  tools, all of them allowed (``--allowedTools``) and anything else refused without asking
  (``--permission-mode dontAsk``);
* points it at the gateway's Anthropic Messages dialect: ``ANTHROPIC_BASE_URL`` = the gateway,
  ``--model`` = the run's model name, and its key: under the guard no ``ANTHROPIC_API_KEY`` at
  all but an ``apiKeyHelper`` (``--settings``; in ``--bare`` mode the key is that or the
  variable) that prints ``kit.credential``, a placeholder the sandbox's forwarder replaces by
  the run token in each request's headers (claimgrid/sandbox/loopback.py ``--inject``): no
  process of the run, Claude Code or its Bash (``env``, ``/proc/$PPID/environ``), holds the
  token. Unguarded ``ANTHROPIC_API_KEY`` is the token itself, in the environment its Bash
  inherits (the weaker case: Claude Code's own switch to strip it from subprocesses,
  ``CLAUDE_CODE_SUBPROCESS_ENV_SCRUB``, refuses to start without its own bubblewrap
  sandbox, which cannot nest inside the guard's; the gateway refuses the token once the run
  has ended); its own retries
  off (``CLAUDE_CODE_MAX_RETRIES=0``: each refused call is seen once, as with every client);
* turns off everything that is not the model call: non-essential traffic, telemetry, the
  auto-updater, error reporting, cost warnings (their documented variables), with ``HOME``
  and ``CLAUDE_CONFIG_DIR`` in the run's sandbox folder;
* takes the ``result`` event of ``--output-format stream-json`` as the run's final report and
  its ``tool_use`` blocks as runtime ``tool_call`` events.

Under the guard (``ctl["agent_sandbox"]``, computed by the driver: claimgrid.launch.confine)
the whole of Claude Code runs inside the harness's bubblewrap sandbox: its command is that
prefix + ``claude ...``, its working folder ``/workspace`` (the workspace, read-write), its
``HOME`` and config folder the run's own ``/tmp``, the run's uid, cgroup and limits, an empty
network namespace whose one way out is the loopback forwarder to the gateway's Unix socket
(``ANTHROPIC_BASE_URL`` is the forwarder's port), so its Bash reaches neither the host's
files nor any address but the gateway. Its own Bash sandbox stays off (the guard is the
wall). Unguarded (``--guard off``, no bwrap; ``agent_sandbox`` null) it runs as the
adapter's child with no sandbox at all, as the driver's user (docs/CONTRACTS.md). The
executable is the platform package's (``@anthropic-ai/claude-code-linux-x64``, from the npm
registry); the main package's install script, which only copies it over a stub, is not run.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys

import kit  # frameworks/_harness/kit.py

FRAMEWORK = "claude-code"
PACKAGE = "@anthropic-ai/claude-code"
NATIVE = "@anthropic-ai/claude-code-linux-x64"
# What --bare offers (its minimal tool set); named so a later version adding one does not widen it.
TOOLS = "Read,Edit,Bash"
# Seconds kept back from the run's timeout so the adapter, not the launcher, stops Claude Code
# and records why.
STOP_MARGIN_S = 5.0
# Claude Code's documented switches for traffic that is not the model call.
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_COST_WARNINGS": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}


def _modules() -> str:
    return os.path.join(os.path.realpath(sys.prefix), "npm", "node_modules")  # real: the sandbox binds it so


def claude_bin() -> str:
    path = os.path.join(_modules(), NATIVE, "claude")
    if not os.path.exists(path):
        raise RuntimeError(f"Claude Code not installed at {path} (grid.py venvs builds it)")
    return path


def _package_version() -> str | None:
    try:
        with open(os.path.join(_modules(), PACKAGE, "package.json")) as fh:
            return json.load(fh).get("version")
    except (OSError, ValueError):
        return None


def preload() -> None:
    """Nothing to import: Claude Code is a separate program started per run."""
    kit.preload("subprocess", shared=False)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        python=platform.python_version(),
        claude_code=_package_version(),
        model_client="claude -p (Anthropic Messages)",
        system_prompt="framework: Claude Code sends its own system prompt",
    )


def command(ctl: dict) -> list[str]:
    """The ``claude`` command line of one run (module docstring): under the guard its key
    from an ``apiKeyHelper`` that prints the placeholder (``kit.credential``)."""
    settings = []
    if ctl.get("agent_sandbox"):
        helper = "printf %s " + shlex.quote(kit.credential(ctl))
        settings = ["--settings", json.dumps({"apiKeyHelper": helper})]
    return [
        claude_bin(),
        "-p",
        "--bare",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        ctl["model"],
        "--tools",
        TOOLS,
        "--allowedTools",
        TOOLS,
        "--permission-mode",
        "dontAsk",
        "--no-session-persistence",
        "--strict-mcp-config",
        *settings,
        "--",
        ctl["prompt"],
    ]


def environment(ctl: dict, home: str, gateway_url: str | None = None) -> dict[str, str]:
    """Claude Code's environment for one run: the gateway (``gateway_url``, default the
    control's), unguarded the run token as ``ANTHROPIC_API_KEY`` (guarded: none), ``HOME`` =
    ``home`` (the run's sandbox folder, or the agent sandbox's ``/tmp``), everything but the
    model call off."""
    gateway_url = gateway_url or ctl["gateway_url"]
    env = {
        **os.environ,
        **QUIET_ENV,
        "HOME": home,
        "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "ANTHROPIC_BASE_URL": gateway_url.rstrip("/").removesuffix("/v1"),
        "ANTHROPIC_API_KEY": ctl["token"],
        "API_TIMEOUT_MS": str(int(kit.call_timeout(ctl) * 1000)),
        # Each Bash command's wall time, whatever timeout the model asks for (its documented
        # variables: the default and the most a call may set).
        "BASH_DEFAULT_TIMEOUT_MS": str(int(kit.command_timeout(ctl) * 1000)),
        "BASH_MAX_TIMEOUT_MS": str(int(kit.command_timeout(ctl) * 1000)),
        "NO_COLOR": "1",
    }
    if ctl.get("agent_sandbox"):
        env.pop("ANTHROPIC_API_KEY")  # its key is the apiKeyHelper's placeholder (command)
    return env


def record_events(rec, agent: str, jsonl: str) -> tuple[str | None, str | None]:
    """Runtime events from Claude Code's stream (``--output-format stream-json``): a
    ``model_call`` per assistant message with its model and usage, a ``tool_call`` per
    ``tool_use`` block. Returns ``(final text, error)`` from its ``result`` event: the text of
    a successful one, the message of one that is an error."""
    text = error = None
    for line in jsonl.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        if ev.get("type") == "assistant" and isinstance(ev.get("message"), dict):
            msg = ev["message"]
            rec.model_call(agent, msg.get("model"), kit.usage(msg.get("usage")))
            for block in msg.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    rec.tool_call(agent, block.get("name"), block.get("input"))
        elif ev.get("type") == "result":
            if ev.get("is_error") or ev.get("subtype") != "success":
                error = str(ev.get("result") or ev.get("subtype"))
            elif isinstance(ev.get("result"), str):
                text = ev["result"]
    return text, error


def launch(ctl: dict) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start Claude Code for this run: inside the agent
    sandbox when the control has one (module docstring), else as the adapter's child."""
    sandbox = ctl.get("agent_sandbox")
    if not sandbox:
        home = os.environ["HOME"]
        os.makedirs(os.path.join(home, ".claude"), exist_ok=True)
        return command(ctl), environment(ctl, home)
    host_home = sandbox["host_home"] or os.environ["HOME"]
    for folder in (".claude", ".cache", ".config", os.path.join(".local", "share")):
        kit.own_folder(os.path.join(host_home, folder), host_home)
    env = environment(ctl, sandbox["home"], sandbox["gateway_url"])
    env.pop("PYTHONPATH", None)  # the harness's folders are not in the sandbox
    return [*sandbox["argv_prefix"], *command(ctl)], env


def run(ctl: dict, tools: list, rec) -> str | None:
    agent = ctl["agent_name"]
    kit.start_run(
        rec,
        ctl,
        None,
        "model calls",
        "gateway",
        command_timeout_s=kit.command_timeout(ctl),
        command_timeout_enforced_by="Claude Code BASH_DEFAULT_TIMEOUT_MS = BASH_MAX_TIMEOUT_MS",
    )
    timeout = max(1.0, float(ctl.get("timeout_s") or 300) - STOP_MARGIN_S)
    text = None
    with kit.recording_errors(rec, agent):
        argv, env = launch(ctl)
        try:
            proc = kit.run_agent(ctl, argv, env, timeout, rec)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"claude -p did not finish within {timeout:.0f} s") from None
        sys.stderr.write(proc.stderr[-20000:])
        sys.stdout.write(proc.stdout[-20000:])
        text, error = record_events(rec, agent, proc.stdout)
        if error is not None or proc.returncode != 0:
            # Claude Code's own account of the failure (its result event) over its stderr, whose
            # last line is often an unrelated warning.
            tail = error or (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"claude -p exited {proc.returncode}: {tail[:500]}")
    return kit.final_message(rec, agent, text)
