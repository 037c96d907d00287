"""The control message's declared shape on the driver's side: ``frameworks/_harness/harness_control.py``, loaded from its file.

The adapter side imports no ``claimgrid``, so the shape lives there, stdlib only, and the
driver checks with the very same code. :func:`check_control` runs on
every control before the launcher sends it; a control that is not a ``Control`` is a harness
error of the run, never a run whose adapter reads a silent default.
"""

from __future__ import annotations

import importlib.util
import sys

from claimgrid import ROOT
from claimgrid.reference import probe_kinds

_PATH = ROOT / "frameworks" / "_harness" / "harness_control.py"
_spec = importlib.util.spec_from_file_location("claimgrid_harness_control", _PATH)
assert _spec is not None and _spec.loader is not None  # a file of this checkout
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
# The file imports its sibling ``probe_kinds`` as the adapter side does (the harness folder on
# sys.path): here it gets the driver's identical copy (claimgrid.reference.probe_kinds), under
# that name only while it loads.
_saved = sys.modules.get("probe_kinds")
sys.modules["probe_kinds"] = probe_kinds
try:
    _spec.loader.exec_module(_module)
finally:
    if _saved is None:
        del sys.modules["probe_kinds"]
    else:
        sys.modules["probe_kinds"] = _saved

SCHEMA: int = _module.SCHEMA
ControlError = _module.ControlError
check_control = _module.check_control
