"""Launching adapter processes (the driver never imports framework code).

* ``launcher``  - ``Launcher``: one adapter process per run, fresh or warm; the adapter's environment;
* ``fresh``     - the fresh strategy (a new interpreter per run);
* ``warm``      - the warm pool (one parent per framework, a forked child per run);
* ``pipe``      - the tools pipe, drained on its own thread;
* ``outcome``   - reading and checking the outcome file;
* ``kill``      - killing a whole process tree;
* ``watchdog``  - the dead-man switch that cleans up after a driver killed with -9;
* ``guard``     - the glue between the guard (claimgrid/sandbox/guard.py) and a run: its command
  sandbox for the control JSON, and a workspace handed to the sandbox user;
* ``records``   - the typed records (``ProcessRecord``, ``LaunchResult``).
"""

from claimgrid.launch.handles import LaunchResult, ProcessRecord, RunInterrupted
from claimgrid.launch.launcher import ISOLATIONS, Launcher, adapter_env
from claimgrid.launch.warm import WarmStartError

__all__ = ["ISOLATIONS", "LaunchResult", "Launcher", "ProcessRecord", "RunInterrupted", "WarmStartError", "adapter_env"]
