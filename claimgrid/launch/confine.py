"""Glue between the guard (claimgrid/sandbox/guard.py) and one run.

The adapter process runs in the framework's venv and never imports ``claimgrid``, so the
driver computes the agent's command sandbox here and passes it in the control JSON
(``ctl["command_sandbox"]``, docs/CONTRACTS.md); the tool layer only appends
``["/bin/bash", "-c", command]``.
"""

from __future__ import annotations

import os
from pathlib import Path

from claimgrid.sandbox.guard import GITCONFIG, Guard, PerRun, python_roots
from claimgrid.sandbox.slots import NOBODY, Box

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
