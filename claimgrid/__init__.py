"""claimgrid: an experiment grid that checks agent completion claims against evidence
the harness observed itself. The driver package never imports agent-framework code.

Packages, by pipeline stage (each imports only the ones below it; ``pyproject.toml``'s
import-linter contract checks it): ``commands`` (``grid.py``'s verbs) > ``execute`` (cells,
scheduler, engine, node, runner, Ray) > ``ledger`` > ``launch`` | ``verify`` > ``classify`` >
``gateway`` > ``reference`` > ``store`` > ``inputs`` | ``sandbox``; shared by all: ``errors``,
``vocab``, ``caps``, ``globs``, ``trace``, ``procstat``.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
