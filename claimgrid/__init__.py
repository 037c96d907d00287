"""claimgrid: an experiment grid that checks agent completion claims against evidence
the harness observed itself. The driver package never imports agent-framework code."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
