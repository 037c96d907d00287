"""Launching adapter processes (the driver never imports framework code).

Modules:

* ``confine`` - Glue between the guard (claimgrid/sandbox/guard.py) and one run;
* ``control`` - The control message's declared shape on the driver's side:
  ``frameworks/_harness/harness_control.py``, loaded from its file;
* ``fresh`` - the fresh strategy (a new interpreter per run);
* ``handles`` - Typed records the launcher passes around (no dicts with optional keys);
* ``kill`` - killing a whole process tree;
* ``launcher`` - ``Launcher``: one adapter process per run, fresh or warm; the adapter's
  environment;
* ``outcome`` - reading and checking the outcome file;
* ``pipe`` - the tools pipe, drained on its own thread;
* ``warm`` - the warm pool (one parent per framework, a forked child per run);
* ``watchdog`` - the dead-man switch that cleans up after a driver killed with -9.
"""

from claimgrid.launch.handles import LaunchResult, ProcessRecord, RunInterrupted
from claimgrid.launch.launcher import ISOLATIONS, Launcher, adapter_env
from claimgrid.launch.warm import WarmStartError

__all__ = ["ISOLATIONS", "LaunchResult", "Launcher", "ProcessRecord", "RunInterrupted", "WarmStartError", "adapter_env"]
