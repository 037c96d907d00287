"""Glue between the guard (claimgrid/sandbox/guard.py) and one run.

The adapter process runs in the framework's venv and never imports ``claimgrid``, so the
driver computes the agent's command sandbox here and passes it in the control JSON
(``ctl["command_sandbox"]``, docs/CONTRACTS.md); the tool layer only appends
``["/bin/bash", "-c", command]``.
"""

from __future__ import annotations

import os
from pathlib import Path

from claimgrid.sandbox.guard import NOBODY, Guard, python_roots

BASH = "/usr/bin/bash"  # /bin is a link to usr/bin inside the sandbox where it is one outside


def command_sandbox(guard: Guard | None, workspace: Path, python: str, timeout_s: float) -> dict | None:
    """``{"argv_prefix": [...], "timeout_s": N}`` for a guarded run, None when unguarded.

    ``python``: the task's interpreter (``Task.python``); ``python``/``python3`` inside are it.
    """
    if guard is None or not guard.enabled:
        return None
    return {
        "argv_prefix": guard.wrap([], workspace=workspace, interpreters=python_roots(python), python=python),
        "timeout_s": timeout_s,
    }


def hand_over(guard: Guard | None, workspace: Path) -> None:
    """Make ``workspace`` the sandbox user's: when the harness runs as root, every entry is
    chowned to ``nobody`` (dirs 0755, files 0644 plus their owner-exec bit), so the agent's
    commands can write it without it being world-writable. Unguarded or not root: unchanged."""
    if guard is None or not guard.enabled or not guard.as_root:
        return
    for dirpath, dirnames, filenames in os.walk(workspace):
        os.lchown(dirpath, NOBODY, NOBODY)
        os.chmod(dirpath, 0o755)
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            os.lchown(full, NOBODY, NOBODY)
            if name in filenames and not os.path.islink(full):
                os.chmod(full, 0o755 if os.stat(full).st_mode & 0o100 else 0o644)
