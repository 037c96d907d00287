"""Which kind of model a ledger row is about, from the reference registry's entries.

Contract: :func:`model_kind` ``(name) -> str``: ``"behaviour"`` (a reference model crossed
with every condition: what an agent does), ``"fault"`` (a fault model: the framework's
reaction to a broken call is the finding), ``"probe"`` (a fault model whose probe is an
output shape or a tool-side fault), ``"gaming"`` (a reference model crossed with the
untreated cell only that is no fault: it games the verification), or ``"real"`` (not a
reference model: a stochastic model). The first screen never puts a behaviour model and
a probe model in one sentence, so it groups its findings by these kinds.
"""

from __future__ import annotations

KINDS = ("behaviour", "gaming", "fault", "probe", "real")


def model_kind(name: str) -> str:
    from claimgrid.reference.registry import get

    m = get(name)
    if m is None:
        return "real"
    if m.fault:
        return "probe" if (m.probe.shape or m.probe.tool_fault) else "fault"
    return "behaviour" if m.runs_in is None else "gaming"
