"""Glue between the guard (claimgrid/sandbox/guard.py) and one run.

The adapter process runs in the framework's venv and never imports ``claimgrid``, so the
driver computes the agent's command sandbox here and passes it in the control JSON
(``ctl["command_sandbox"]``, docs/adapter-authors.md); the tool layer only appends
``["/bin/bash", "-c", command]``. For a coding agent that brings its own tools (venvs.toml
``kind = "cli"``) the whole agent runs in the guard instead: :func:`agent_sandbox` is
``ctl["agent_sandbox"]``, the prefix its adapter puts before the agent's command.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

from claimgrid import caps
from claimgrid.sandbox import loopback
from claimgrid.sandbox.guard import GITCONFIG, SANDBOX_WORKSPACE, Guard, PerRun, python_roots
from claimgrid.sandbox.slots import NOBODY, Box

# Where the agent sandbox holds the gateway's socket and the forwarder that reaches it.
SANDBOX_GATEWAY_SOCKET = "/opt/claimgrid/gateway.sock"
SANDBOX_LOOPBACK = "/opt/claimgrid/loopback.py"
# The agent's `bash` on PATH: each command under the run's per-command wall-time limit
# (claimgrid/sandbox/limited_bash.sh); /opt/claimgrid/bin is first on the sandbox's PATH.
LIMITED_BASH = Path(loopback.__file__).with_name("limited_bash.sh")
SANDBOX_LIMITED_BASH = "/opt/claimgrid/bin/bash"
# The forwarder's port on the sandbox's own loopback. Any port above 1023 would do (the network
# namespace is the run's own and empty); a fixed one lets the adapter write it into the agent's
# configuration before the agent starts. It differs from the gateway's host port, so a command
# that tries that port inside the sandbox meets nothing.
LOOPBACK_PORT = 18080
# What a guarded coding agent holds instead of its run token (its config's key, its
# environment): worthless anywhere, replaced by the token in each request's headers by the
# forwarder, the one process of the sandbox that knows it (claimgrid/sandbox/loopback.py).
CREDENTIAL_PLACEHOLDER = "claimgrid-placeholder-not-a-credential"

BASH = "/usr/bin/bash"  # /bin is a link to usr/bin inside the sandbox where it is one outside


def command_sandbox(
    guard: Guard | None,
    workspace: Path,
    python: str,
    timeout_s: float,
    box: Box | None = None,
    tmp: Path | None = None,
) -> dict | None:
    """``{"argv_prefix": [...], "timeout_s": N}`` for a guarded run, None when unguarded.

    ``python``: the task's interpreter (``Task.python``); ``python``/``python3`` inside are it.
    ``box``: the run's uid and cgroups; ``tmp``: the run's own ``/tmp`` and ``HOME``
    (:func:`agent_tmp`), kept from one command to the next; None: a fresh tmpfs per command.
    """
    if guard is None or not guard.enabled:
        return None
    return {
        "argv_prefix": guard.wrap(
            [],
            workspace=workspace,
            interpreters=python_roots(python),
            python=python,
            per_run=PerRun(box=box, tmp=str(tmp) if tmp is not None else None),
        ),
        "timeout_s": timeout_s,
    }


def agent_tmp(guard: Guard | None, folder: Path, box: Box | None = None) -> Path | None:
    """Create the run's private ``/tmp`` (also its ``HOME``) at ``folder``, outside the
    workspace, owned by the sandbox user, with a ``.gitconfig`` giving git an identity (the
    run's uid has no account). None when unguarded (the command sandbox has its own HOME)."""
    if guard is None or not guard.enabled:
        return None
    folder.mkdir(mode=0o700)
    (folder / ".gitconfig").write_text(GITCONFIG)
    if guard.as_root:
        uid = box.uid if box is not None else NOBODY
        for path in (folder, folder / ".gitconfig"):
            os.lchown(path, uid, uid)
    return folder


def hand_over(guard: Guard | None, workspace: Path, box: Box | None = None) -> None:
    """Make ``workspace`` the sandbox user's: when the harness runs as root, every entry is
    chowned to the run's uid (``box``; else ``nobody``; dirs 0755, files 0644 plus their
    owner-exec bit), so the agent's commands can write it without it being world-writable.
    Unguarded or not root: unchanged."""
    if guard is None or not guard.enabled or not guard.as_root:
        return
    uid = box.uid if box is not None else NOBODY
    for dirpath, dirnames, filenames in os.walk(workspace):
        os.lchown(dirpath, uid, uid)
        os.chmod(dirpath, 0o755)
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            os.lchown(full, uid, uid)
            if name in filenames and not os.path.islink(full):
                os.chmod(full, 0o755 if os.stat(full).st_mode & 0o100 else 0o644)


@dataclass(frozen=True)
class AgentDeadlines:
    """A coding agent's wall-time limits: ``run_s`` the run's (its process group killed past
    it), ``command_s`` each command its shell tool runs."""

    run_s: float
    command_s: float = 30


def agent_sandbox(
    guard: Guard | None,
    workspace: Path,
    *,
    agent_python: str,
    task_python: str,
    gateway_socket: str | None,
    deadlines: AgentDeadlines,
    box: Box | None = None,
    tmp: Path | None = None,
) -> dict | None:
    """``ctl["agent_sandbox"]`` of a coding agent's run (docs/adapter-authors.md), None unguarded.

    The adapter runs ``argv_prefix + [agent, args...]``: a bwrap sandbox of the guard with the
    workspace read-write at ``workspace`` (``/workspace``, the agent's working folder), the
    agent's venv (its Node.js and ``<venv>/npm``) and the task's interpreter read-only at their
    own paths, ``python``/``python3`` the task's, the run's own folder ``tmp`` (owned by the
    run's uid) as ``/tmp`` and ``HOME`` (``home``; on the host ``host_home``, where the adapter
    writes the agent's configuration), own pid/ipc/uts namespaces, an empty network namespace,
    the run's uid, cgroup and limits (CPU seconds per process from the run's timeout:
    ``caps.AGENT_CPU_PER_TIMEOUT_S``), ``--die-with-parent``. Inside, before the agent,
    :mod:`claimgrid.sandbox.loopback` (run by ``agent_python``, the framework venv's) listens
    on ``127.0.0.1:LOOPBACK_PORT`` and forwards each connection to the gateway's Unix socket
    bound at :data:`SANDBOX_GATEWAY_SOCKET`: ``gateway_url`` is the agent's base URL, its
    only address. ``credential`` is the agent's API key: a placeholder the forwarder replaces
    by the run token in each request's headers, so no process of the agent can read the token
    (``--inject``). The environment the adapter starts it with passes in (the token is not in
    it), under the guard's ``PATH``, ``HOME``, ``LANG`` and git variables. Its standard input
    is to be a pipe whose write end the adapter holds until the agent has ended, the token
    its first line: the lifeline that ends the whole sandbox (claimgrid/sandbox/loopback.py).
    ``uid``/``cgroup_procs``: the run's, which the adapter's reaper clears before it reads
    anything back (frameworks/_harness/reaper.py). ``bash`` on the sandbox's ``PATH`` is
    claimgrid/sandbox/limited_bash.sh: a command of an agent that finds its shell there runs
    under ``command_timeout_s`` of wall time (``command_timeout_s`` in the result).

    None when unguarded (``--guard off``, no bwrap): the agent runs as the adapter's child,
    as before. A guarded grid whose gateway serves no Unix socket is a harness bug (raised).
    """
    timeout_s, command_timeout_s = deadlines.run_s, deadlines.command_s
    if guard is None or not guard.enabled:
        return None
    if gateway_socket is None:
        raise RuntimeError("a guarded coding agent needs the gateway's Unix socket (Gateway(unix_socket=...))")
    limits = dataclasses.replace(
        guard.limits, cpu_s=max(guard.limits.cpu_s, math.ceil(timeout_s * caps.AGENT_CPU_PER_TIMEOUT_S))
    )
    roots = sorted({*python_roots(agent_python), *python_roots(task_python)})
    prefix = guard.wrap(
        [
            agent_python,
            SANDBOX_LOOPBACK,
            SANDBOX_GATEWAY_SOCKET,
            str(LOOPBACK_PORT),
            "--inject",
            CREDENTIAL_PLACEHOLDER,
            "--",
        ],
        workspace=workspace,
        interpreters=roots,
        python=task_python,
        env={"CLAIMGRID_COMMAND_TIMEOUT_S": f"{command_timeout_s:g}"},
        per_run=PerRun(
            box=box,
            tmp=str(tmp) if tmp is not None else None,
            binds=[
                (loopback.__file__, SANDBOX_LOOPBACK, False),
                (gateway_socket, SANDBOX_GATEWAY_SOCKET, True),
                (str(LIMITED_BASH), SANDBOX_LIMITED_BASH, False),
            ],
            keep_env=True,
            limits=limits,
        ),
    )
    return {
        "argv_prefix": prefix,
        "workspace": SANDBOX_WORKSPACE,
        "home": "/tmp",
        "host_home": str(tmp) if tmp is not None else None,
        "gateway_url": f"http://127.0.0.1:{LOOPBACK_PORT}/v1",
        # The agent's key (never the token): the adapter sends the token on the lifeline.
        "credential": CREDENTIAL_PLACEHOLDER,
        "command_timeout_s": command_timeout_s,
        # What the adapter's reaper (frameworks/_harness/reaper.py) also clears before it reads
        # anything back: the run's own uid (nobody: shared, not scanned) and cgroup.
        "uid": box.uid if box is not None else NOBODY,
        "cgroup_procs": list(box.procs) if box is not None else [],
    }
