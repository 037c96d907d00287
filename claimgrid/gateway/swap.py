"""Which swap the gateway applies on one call of a run (docs/DESIGN.md, "Conditions")."""

from __future__ import annotations

from claimgrid.reference.script import RunScript

SWAPS = ("none", "silent", "reported", "bound")


def swap_for_call(script: RunScript, call_index: int) -> str:
    """``none`` while the assigned model is available; from ``unavailable_from_call`` on:
    ``silent`` / ``reported`` (a substitute serves, under the assigned or its own name) or
    ``bound`` (refused, no substitute)."""
    if script.unavailable_from_call < 0 or call_index < script.unavailable_from_call:
        return "none"
    if script.on_unavailable == "refuse":
        return "bound"
    if script.on_unavailable == "substitute":
        return "silent" if script.reported_name == "assigned" else "reported"
    return "none"
