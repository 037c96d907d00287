"""Tool-side fault probes: registry entries whose fault the harness tool layer applies.

A tool fault model behaves like ``base`` (``diligent``) on every call; the run's control
object carries the fault (``ctl["tool_fault"]``, built by :func:`control_spec`), and the
tool layer (frameworks/_harness/tool_faults.py) applies it to the first executed call of one
of ``categories``. The model's messages never carry it. What a framework does with the
failed, oversized or undecodable result (passes it to the model, raises, retries, ends,
reports success) is the finding, recorded in the run's fault facts
(claimgrid.classify.reactions); the truth states only what holds whatever it does
(``fault_truth``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

# The built-in behaviours register first, so the default models keep their order before the probes.
from claimgrid.reference import readers, speakers  # noqa: F401
from claimgrid.reference.policies import like_base, register_probe
from claimgrid.reference.registry import Probe, get

READS = ("read",)
CHANGES = ("edit", "write", "bash")


@dataclass(frozen=True)
class ToolFault:
    kind: str  # one of the tool layer's kinds (frameworks/_harness/tool_faults.py KINDS)
    categories: tuple[str, ...] = READS
    base: str = "diligent"


def tool_fault(model: str) -> ToolFault | None:
    """The tool fault on ``model``'s registry entry (None: not a tool fault model)."""
    entry = get(model)
    return entry.tool_fault if entry is not None else None


def control_spec(model: str) -> dict | None:
    """What the driver hands the tool layer for a run of ``model`` (None: no fault)."""
    fault = tool_fault(model)
    return {"kind": fault.kind, "categories": list(fault.categories)} if fault else None


def register_tool_fault(name: str, fault: ToolFault, description: str, default: bool = False):
    """Register a tool fault model: ``fault.base``'s policy; the tool layer applies ``fault``."""
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    return register_probe(name, Probe(tool_fault=fault), like_base(name, fault.base), description, default, module)


tool_error = register_tool_fault(
    "tool-error",
    ToolFault("error"),
    "tool fault: diligent; its first read is not run and comes back as a tool failure (an OSError)",
    default=True,
)
tool_timeout = register_tool_fault(
    "tool-timeout",
    ToolFault("timeout"),
    "tool fault: diligent; its first read comes back as a tool timeout",
    default=True,
)
tool_huge = register_tool_fault(
    "tool-huge-result",
    ToolFault("huge"),
    "tool fault: diligent; its first read returns a 1,000,000-character result",
    default=True,
)
tool_bad_utf8 = register_tool_fault(
    "tool-bad-utf8",
    ToolFault("bad_utf8"),
    "tool fault: diligent; its first read returns text that is not valid UTF-8",
    default=True,
)
tool_changed_then_failed = register_tool_fault(
    "tool-changed-then-failed",
    ToolFault("changed_then_failed", CHANGES),
    "tool fault: diligent; its first edit, write or command changes the workspace, then reports failure",
    default=True,
)
