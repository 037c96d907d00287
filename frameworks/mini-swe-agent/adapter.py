"""The ``mini-swe-agent`` adapter: mini-swe-agent's ``mini`` program run as one grid run, on the kit.

mini-swe-agent (a PyPI package, locked in this folder's uv project) brings its own tool, one
``bash`` function tool whose commands its ``LocalEnvironment`` runs, each in a new subshell, so
the harness tools handed to ``run`` are not used: what the model asked for and what
mini-swe-agent sent back is in the gateway's exchanges, and the workspace before, between model
calls and after is the verifier's (docs/CONTRACTS.md, "Agents with their own tools"). Per run,
the adapter

* runs mini-swe-agent's ``mini`` program (``minisweagent.run.mini``, started by this folder's
  gateway_model.py given as ``python -c``) with its built-in ``mini.yaml`` (its own system and
  instance templates: the task as the instance), its non-interactive ``DefaultAgent``
  (``--agent-class default``: no confirmation, no prompt at a limit or at the end), the run's
  model-call budget as its ``step_limit``, and its own ``OpenRouterModel`` (``--model-class``
  gateway_model's ``GatewayModel``): one ``requests`` POST per attempt to the gateway's Chat
  Completions dialect with the run's model name, its key (below) from ``OPENAI_API_KEY`` in its
  environment and the run's per-call timeout, which are the only three things GatewayModel
  changes. Its default ``LitellmModel`` would import LiteLLM in every run's fresh process
  (about 5 CPU-seconds: bench/README.md, "Coding agents"); the client used is a parity fact
  (``runtime_versions.model_client``);
* keeps every refused call one gateway exchange: mini-swe-agent's own retry (tenacity, up to
  10 attempts) is set to one attempt by its documented variable
  ``MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT``; ``requests`` makes no retry of its own;
  cost tracking ignores the unpriced model (``MSWEA_COST_TRACKING=ignore_errors``), the
  first-run setup and start-up banner are off;
* the key: ``OPENAI_API_KEY`` is ``kit.credential``, under the guard a placeholder the
  sandbox's forwarder replaces by the run token in each request's headers
  (claimgrid/sandbox/loopback.py ``--inject``), so no process of the run can read the token;
  unguarded the token itself (readable by its commands through ``/proc/$PPID/environ``: the
  weaker case; the gateway refuses it once the run has ended). The commands' own
  environment (mini-swe-agent's ``os.environ | environment.env``) has it empty either way
  (``environment.env`` sets ``OPENAI_API_KEY`` to the empty string);
* reads its trajectory file (``-o``) once every process of the run is gone, by
  ``kit.read_back`` (no link followed, a regular file of the run's uid, bounded; anything
  else a recorded ``readback_refused`` event): a runtime ``model_call`` per assistant message with the
  model name its response carried and its usage, a ``tool_call`` per ``bash`` action, an
  ``error`` for an exit that is not a submission (its ``exit_status``: ``LimitsExceeded``,
  ``RepeatedFormatError``, an exception's name), and its submission as the run's final report.
  mini-swe-agent ends only when a command's output starts with the line
  ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``; the rest of that output is the submission
  (tools.toml's ``[final_answer]`` spells a policy's final text as that command).

Under the guard (``ctl["agent_sandbox"]``, computed by the driver: claimgrid.launch.confine) the
whole of mini-swe-agent runs inside the harness's bubblewrap sandbox: its command is that
prefix + this venv's python, its working folder and ``environment.cwd`` ``/workspace`` (the
workspace, read-write), ``HOME`` (its config folder, the trajectory) the run's own ``/tmp``, the
run's uid, cgroup and limits, an empty network namespace whose one way out is the loopback
forwarder to the gateway's Unix socket (GatewayModel's ``gateway_url`` is the forwarder's port). Unguarded
(``--guard off``, no bwrap; ``agent_sandbox`` null) it runs as the adapter's child with no
sandbox at all, its commands as the driver's user (it has no sandbox of its own).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import kit  # frameworks/_harness/kit.py

FRAMEWORK = "mini-swe-agent"
# Seconds kept back from the run's timeout so the adapter, not the launcher, stops the agent and
# records why.
STOP_MARGIN_S = 5.0
# The files this adapter reads back from the agent's HOME once the agent has ended
# (kit.read_back); the conformance suite attacks each (tests/frameworks/test_agent_leftovers.py).
TRAJECTORY = "trajectory.json"
READ_BACK = (TRAJECTORY,)
SUBMITTED = "Submitted"
# The program each run starts (gateway_model.py: mini with its own OpenRouterModel at the
# gateway, no LiteLLM import), passed as ``python -c``: nothing of this folder is in the sandbox.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_model.py")) as _f:
    GATEWAY_MODEL_SOURCE = _f.read()
MODEL_CLASS = "claimgrid_mini_gateway.GatewayModel"  # the exit_status of a run that ended on its submission command
# mini-swe-agent's documented switches: one attempt per model call (its retry would otherwise
# resend a refused call up to 10 times, 4-60 s apart), no cost lookup for an unpriced model, no
# interactive first-run setup, no banner.
QUIET_ENV = {
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_CONFIGURED": "true",
    "MSWEA_SILENT_STARTUP": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
}


def preload() -> None:
    """Nothing to import: mini-swe-agent is a separate program started per run."""
    kit.preload("subprocess", shared=False)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "mini-swe-agent",
        "requests",
        python=platform.python_version(),
        model_client=(
            "mini-swe-agent OpenRouterModel (requests, Chat Completions, tool calling) at the "
            "gateway, the run's key and per-call deadline (gateway_model.py); not LitellmModel"
        ),
        retries={"litellm_num_retries": None, "mini_swe_agent_model_retry_attempts": 1},
        system_prompt="framework: mini-swe-agent's mini.yaml system and instance templates",
        streaming=False,
    )


def command(ctl: dict, python: str, workspace: str, gateway_url: str, home: str) -> list[str]:
    """The ``mini`` command line of one run (module docstring), its trajectory at ``home``: this
    folder's gateway_model.py as ``python -c`` (it runs ``minisweagent.run.mini``), its
    ``GatewayModel`` as mini's ``--model-class``."""
    return [
        python,
        "-c",
        GATEWAY_MODEL_SOURCE,
        "--agent-class",
        "default",
        "--yolo",
        "--exit-immediately",
        "--model",
        ctl["model"],
        "--model-class",
        MODEL_CLASS,
        "--output",
        os.path.join(home, TRAJECTORY),
        "--config",
        "mini.yaml",
        "--config",
        f"agent.step_limit={kit.turn_limit(ctl)}",
        "--config",
        "agent.cost_limit=0",
        "--config",
        "model.gateway_url=" + json.dumps(gateway_url),
        "--config",
        f"model.call_timeout_s={kit.call_timeout(ctl):g}",
        "--config",
        "environment.cwd=" + json.dumps(workspace),
        # Each command's wall time: LocalEnvironment kills its process group after it.
        "--config",
        f"environment.timeout={max(1, round(kit.command_timeout(ctl)))}",
        "--config",
        "environment.env.OPENAI_API_KEY=" + json.dumps(""),
        "--task",
        ctl["prompt"],
    ]


def environment(ctl: dict, home: str) -> dict[str, str]:
    """mini-swe-agent's environment for one run: ``HOME`` (its config folder) ``home``, the run
    key (``kit.credential``) as the key GatewayModel reads, the quiet switches."""
    env = {
        **os.environ,
        **QUIET_ENV,
        "HOME": home,
        "OPENAI_API_KEY": kit.credential(ctl),
        "MSWEA_GLOBAL_CONFIG_DIR": os.path.join(home, ".config", "mini-swe-agent"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
    }
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        env.pop(name, None)  # the gateway is GatewayModel's address; nothing else names one
    return env


def launch(ctl: dict) -> tuple[list[str], dict[str, str], str]:
    """The command line and environment that start mini-swe-agent for this run, and the host
    path of its trajectory: inside the agent sandbox when the control has one (module
    docstring), else as the adapter's child."""
    sandbox = ctl.get("agent_sandbox")
    # The venv's own python (not the interpreter it links to, which has no minisweagent), by the
    # venv's real path: the agent sandbox binds the venv there.
    python = os.path.join(os.path.realpath(sys.prefix), "bin", "python")
    if not sandbox:
        home = os.environ["HOME"]
        for folder in (".cache", ".config", os.path.join(".local", "share")):
            os.makedirs(os.path.join(home, folder), exist_ok=True)
        argv = command(ctl, python, ctl["workspace"], ctl["gateway_url"], home)
        return argv, environment(ctl, home), os.path.join(home, TRAJECTORY)
    host_home = sandbox["host_home"] or os.environ["HOME"]
    for folder in (".cache", ".config", os.path.join(".local", "share")):
        kit.own_folder(os.path.join(host_home, folder), host_home)
    env = environment(ctl, sandbox["home"])
    env.pop("PYTHONPATH", None)  # the harness's folders are not in the sandbox
    argv = command(ctl, python, sandbox["workspace"], sandbox["gateway_url"], sandbox["home"])
    return [*sandbox["argv_prefix"], *argv], env, os.path.join(host_home, TRAJECTORY)


def read_trajectory(rec, ctl: dict, path: str) -> dict | None:
    """The trajectory mini-swe-agent saved (after every step), None if it wrote none or what
    is there is refused (``kit.read_back``: no link followed, a regular file of the run's uid,
    bounded; the refusal recorded) or not a JSON object."""
    text = kit.read_back(rec, ctl, *os.path.split(path), "trajectory")
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def record_events(rec, agent: str, trajectory: dict) -> tuple[str | None, str | None]:
    """Runtime events from the trajectory (module docstring); returns ``(submission, error)``:
    the submission of a run that ended on it, else the exit status (and its message) of one
    that ended otherwise."""
    for msg in trajectory.get("messages") or []:
        extra = msg.get("extra") if isinstance(msg, dict) and isinstance(msg.get("extra"), dict) else {}
        response = extra.get("response")
        if not isinstance(response, dict):
            continue
        # An assistant message, or the format-error message that keeps a response it could not
        # parse (no tool call, an unknown tool, arguments that are not JSON).
        rec.model_call(
            agent,
            response.get("model"),
            kit.usage(response.get("usage"), "prompt_tokens", "completion_tokens", "total_tokens"),
        )
        for action in extra.get("actions") or [] if msg.get("role") == "assistant" else []:
            if isinstance(action, dict):
                rec.tool_call(agent, "bash", {"command": action.get("command")})
    info = trajectory.get("info") if isinstance(trajectory.get("info"), dict) else {}
    status = info.get("exit_status") or "no exit status"
    if status == SUBMITTED:
        return str(info.get("submission") or ""), None
    last = (trajectory.get("messages") or [{}])[-1]
    detail = last.get("content") if isinstance(last, dict) and isinstance(last.get("content"), str) else ""
    return None, f"{status}: {detail}" if detail and detail != status else str(status)


def run(ctl: dict, tools: list, rec) -> str | None:
    agent = ctl["agent_name"]
    limit = kit.turn_limit(ctl)
    kit.start_run(
        rec,
        ctl,
        limit,
        "model calls (agent.step_limit)",
        "framework",
        command_timeout_s=max(1, round(kit.command_timeout(ctl))),
        command_timeout_enforced_by="mini-swe-agent environment.timeout (its process group killed)",
    )
    timeout = max(1.0, float(ctl.get("timeout_s") or 300) - STOP_MARGIN_S)
    text = error = None
    with kit.recording_errors(rec, agent):
        argv, env, trajectory_path = launch(ctl)
        proc = None
        try:
            proc = kit.run_agent(ctl, argv, env, timeout, rec)
        except subprocess.TimeoutExpired:
            pass  # its trajectory so far is still its record
        # After run_agent: every process of the run is gone, whichever way it ended (a process
        # that outlived the kill raised, and nothing is read back).
        trajectory = read_trajectory(rec, ctl, trajectory_path)
        if trajectory is not None:
            text, error = record_events(rec, agent, trajectory)
        if proc is None:
            raise RuntimeError(f"mini did not finish within {timeout:.0f} s")
        sys.stderr.write(proc.stderr[-20000:])
        sys.stdout.write(proc.stdout[-20000:])
        if proc.returncode != 0 or trajectory is None:
            tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"mini exited {proc.returncode}: {tail[:500]}")
        if error is not None:
            # It ended without a submission (a limit, repeated format errors): its own account.
            kit.record_error(rec, agent, error, error.split(":", 1)[0])
    return kit.final_message(rec, agent, text)
