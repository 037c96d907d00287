"""A registry entry's probe facts are one typed value (registry.Probe), read through the entry."""

from __future__ import annotations

import dataclasses

import pytest

from claimgrid.errors import ClaimgridError
from claimgrid.reference import Probe, Turn, reference_model, registry


def _parts(probe: Probe) -> dict:
    return {f.name: getattr(probe, f.name) for f in dataclasses.fields(Probe)}


def test_every_entry_carries_a_probe_and_reads_its_parts_through_it():
    entries = list(registry.models().values())
    assert entries and all(isinstance(m.probe, Probe) for m in entries)
    for m in entries:
        assert {"gateway_fault": m.gateway_fault, "tool_fault": m.tool_fault, "shape": m.shape} == _parts(m.probe)
        if m.probe.gateway_fault is not None:
            assert m.fault, m.name  # a gateway fault implies a fault model
    # Every kind of probe part is used by some built-in entry (the registry says which).
    for part in _parts(Probe()):
        assert any(getattr(m.probe, part) is not None for m in entries if m.origin == "claimgrid"), part


def test_a_copy_under_another_name_keeps_the_probe():
    entry = next(m for m in registry.models().values() if m.probe != Probe())
    copy = dataclasses.replace(entry, name="copy-of-" + entry.name)
    assert copy.probe == entry.probe and copy.shape == entry.shape and copy.tool_fault == entry.tool_fault


def test_a_probe_that_is_not_a_probe_is_one_error_naming_the_origin_and_registers_nothing():
    before = set(registry.models())
    with pytest.raises(ClaimgridError) as err:
        reference_model("probe-as-dict", behaviour="test double", probe={"shape": "refusal"})(  # type: ignore[arg-type]
            lambda script, messages: Turn(content="done")
        )
    message = str(err.value)
    assert "\n" not in message and "probe-as-dict" in message and "probe must be" in message
    assert message.startswith(registry.origin_of(__name__))
    assert set(registry.models()) == before
