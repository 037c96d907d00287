"""Tool-side fault probes: registry entries whose fault the harness tool layer applies.

A tool fault model behaves like ``base`` (``diligent``) on every call; the run's control
object carries the fault (``ctl["tool_fault"]``, built by :func:`control_spec`), and the
tool layer (frameworks/_harness/tool_faults.py) applies it to the first executed call of one
of ``categories``. The model's messages never carry it. A fault with a delay (``late``) is
handed its absolute delay too, from the run's per-call deadline (:func:`control_spec`), so
the tool layer never decides a deadline. What a framework does with the failed, oversized,
undecodable or late result (passes it to the model, raises, retries, ends,
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
from frameworks._harness.harness_shared.probe_kinds import ToolFaultKind, parse

READS = ("read",)
CHANGES = ("edit", "write", "bash")


@dataclass(frozen=True)
class ToolFault:
    """``kind``: a ``ToolFaultKind`` (a string is parsed into one; an unknown kind is refused)."""

    kind: str  # the tool layer applies it (frameworks/_harness/tool_faults.py)
    categories: tuple[str, ...] = READS
    base: str = "diligent"
    # ``late``: the result is returned this long after the run's per-call deadline (the deadline
    # every adapter gives its model client, ``budgets.model_call_timeout_s``; no adapter gives a
    # tool call a shorter one). Small: the probe runs in every framework's untreated cell.
    past_deadline_s: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", parse(ToolFaultKind, self.kind, "ToolFault.kind"))

    def delay_s(self, model_call_timeout_s: float) -> float:
        """How long the tool layer holds the result back (0 for a fault without a delay)."""
        return float(model_call_timeout_s) + self.past_deadline_s if self.kind == ToolFaultKind.LATE else 0.0


def tool_fault(model: str) -> ToolFault | None:
    """The tool fault on ``model``'s registry entry (None: not a tool fault model)."""
    entry = get(model)
    return entry.tool_fault if entry is not None else None


def control_spec(model: str, model_call_timeout_s: float = 15.0) -> dict | None:
    """What the driver hands the tool layer for a run of ``model`` whose per-call deadline is
    ``model_call_timeout_s`` (None: no fault); ``delay_s`` only for a fault with a delay."""
    fault = tool_fault(model)
    if fault is None:
        return None
    spec: dict = {"kind": str(fault.kind), "categories": list(fault.categories)}
    if fault.delay_s(model_call_timeout_s):
        spec["delay_s"] = fault.delay_s(model_call_timeout_s)
    return spec


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
tool_late_result = register_tool_fault(
    "tool-late-result",
    ToolFault("late", CHANGES),
    "tool fault: diligent; its first edit, write or command runs (the workspace changes), and its result "
    "is returned 1 s after the run's per-call deadline",
    default=True,
)
