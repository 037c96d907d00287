"""The driver's side of the one read-back helper: ``frameworks/_harness/readback.py``, loaded from
its file (the adapter side imports no ``claimgrid``, so the code lives there, stdlib only, and
the driver runs the very same code). What the driver reads from a place an agent could write
(the adapter's outcome file, which an unguarded coding agent running as the driver's user could
replace) goes through :func:`read_back`: no link followed, a regular file of one link, bounded;
anything else a :class:`Refusal` (see that module).
"""

from __future__ import annotations

import importlib.util
import sys

from claimgrid import ROOT

_PATH = ROOT / "frameworks" / "_harness" / "readback.py"
_spec = importlib.util.spec_from_file_location("claimgrid_harness_readback", _PATH)
assert _spec is not None and _spec.loader is not None  # a file of this checkout
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module  # dataclasses resolve the module by name
_spec.loader.exec_module(_module)

Refusal = _module.Refusal
read_back = _module.read_back
read_back_path = _module.read_back_path
MAX_READBACK_BYTES: int = _module.MAX_READBACK_BYTES
