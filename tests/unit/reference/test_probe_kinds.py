"""The probe and fault kinds are one typed registry (frameworks/_harness/harness_shared/probe_kinds.py): a
misspelt kind is refused where it is written (a probe's entry, a user's policy file, the
control's tool fault), never a run that silently behaves as its ``diligent`` base."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.reference import registry
from claimgrid.reference.gateway_faults import GatewayFault
from claimgrid.reference.registry import Probe
from claimgrid.reference.tool_faults import ToolFault
from frameworks._harness.harness_shared.probe_kinds import GatewayFaultKind, ShapeKind, ToolFaultKind, UnknownKind

HARNESS = ROOT / "frameworks" / "_harness"


@pytest.mark.parametrize(
    ("make", "misspelt", "enum"),
    [
        (GatewayFault, "server_eror", "GatewayFaultKind"),
        (ToolFault, "bad-utf8", "ToolFaultKind"),
        (lambda kind: Probe(shape=kind), "paralel", "ShapeKind"),
    ],
)
def test_a_misspelt_kind_is_refused_with_one_line_naming_it(make, misspelt, enum):
    with pytest.raises(UnknownKind) as exc:
        make(misspelt)
    line = str(exc.value)
    assert "\n" not in line and repr(misspelt) in line and enum in line


def test_a_kind_given_as_its_string_becomes_the_member():
    assert GatewayFault("slow").kind is GatewayFaultKind.SLOW
    assert ToolFault("late").kind is ToolFaultKind.LATE
    assert Probe(shape="refusal").shape is ShapeKind.REFUSAL
    assert GatewayFault("rate_limited").refuses and not GatewayFault("cut_off").refuses


def test_every_registered_probe_names_a_member_of_its_kind():
    probes = [m for m in registry.models().values() if m.probe != registry.NO_PROBE]
    assert probes, "the registry holds no probe model"
    for m in probes:
        for part, kinds in ((m.gateway_fault, GatewayFaultKind), (m.tool_fault, ToolFaultKind)):
            if part is not None:
                assert isinstance(part.kind, kinds), m.name
        if m.shape is not None:
            assert isinstance(m.shape, ShapeKind), m.name


def test_a_policy_file_with_a_misspelt_kind_registers_nothing(tmp_path):
    path = tmp_path / "typo.py"
    path.write_text(
        "from claimgrid.reference.tool_faults import ToolFault, register_tool_fault\n"
        "register_tool_fault('typo-fault', ToolFault('timout'), 'tool fault: a typo')\n"
    )
    before = set(registry.models())
    with pytest.raises(ClaimgridError) as exc:
        registry.load_policies(path)
    assert str(path) in str(exc.value) and "'timout'" in str(exc.value)
    assert set(registry.models()) == before


def test_the_tool_layer_refuses_a_misspelt_kind_in_its_control():
    sys.path.insert(0, str(HARNESS))
    modules = set(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location("tool_faults", HARNESS / "tool_faults.py")
        assert spec is not None and spec.loader is not None
        layer = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(layer)
        assert layer.ToolFaultHook({"kind": "late", "categories": ["edit"], "delay_s": 2.0}).take("edit") == "late"
        assert layer.ToolFaultHook(None).take("read") is None
        with pytest.raises(ValueError, match="'lte'"):
            layer.ToolFaultHook({"kind": "lte", "categories": ["edit"]})
    finally:
        sys.path.remove(str(HARNESS))
        for name in set(sys.modules) - modules:
            del sys.modules[name]
