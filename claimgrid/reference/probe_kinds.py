"""The probe and fault kinds: the enums of ``frameworks/_harness/probe_kinds.py``, loaded from its file.

The adapter side imports no ``claimgrid``, so the one registry lives there, stdlib only, and the
driver (the reference models, the gateway, the classifier) uses the very same enums.
"""

from __future__ import annotations

import importlib.util
import sys

from claimgrid import ROOT

_PATH = ROOT / "frameworks" / "_harness" / "probe_kinds.py"
_spec = importlib.util.spec_from_file_location("claimgrid_harness_probe_kinds", _PATH)
assert _spec is not None and _spec.loader is not None  # a file of this checkout
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)

GatewayFaultKind = _module.GatewayFaultKind
ToolFaultKind = _module.ToolFaultKind
ShapeKind = _module.ShapeKind
UnknownKind = _module.UnknownKind
parse = _module.parse
# Pickled (a run script crossing to a Ray worker or a forked node) by this module's name, which
# any process can import, not by the loaded file's.
for _kind in (GatewayFaultKind, ToolFaultKind, ShapeKind, UnknownKind):
    _kind.__module__ = __name__
