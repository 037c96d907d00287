"""Typed records the launcher passes around (no dicts with optional keys)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProcessRecord:
    """What the launcher saw of one adapter process (fresh or warm child).

    ``returncode`` is Popen-style (negative: killed by that signal); ``killed`` counts the
    processes signalled at a timeout or interrupt, ``leftovers`` those swept after the
    adapter exited; ``launch_error`` says why the adapter never ran (or why its status is
    unknown); ``stderr_tail`` overrides the adapter's stderr file (a warm parent's log).
    """

    pid: int | None = None
    returncode: int | None = None
    timed_out: bool = False
    killed: int = 0
    leftovers: int = 0
    launch_error: str | None = None
    stderr_tail: str | None = None
    cpu_s: float | None = None  # user+system CPU of the run (warm: wait4); None: not measured


@dataclass
class LaunchResult:
    """What one adapter run left: outcome (valid or None), tool events, process event.

    ``interrupted``: the grid was stopped (Ctrl-C) while this run was in flight; the run
    proves nothing and must not be stored (``--resume`` runs it again).
    """

    outcome: dict | None
    outcome_status: str  # ok | missing | unparseable | invalid
    tool_events: list[dict]
    process_event: dict  # CONTRACTS source "process"
    stdout_path: str = ""
    stderr_path: str = ""
    interrupted: bool = False


class RunInterrupted(Exception):
    """Raised by the runner for a run whose launch was interrupted (never stored)."""
