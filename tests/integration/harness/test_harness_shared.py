"""frameworks/_harness/harness_shared is the one package the driver and the adapters both import:
stdlib only and no ``claimgrid`` (an adapter's venv has neither claimgrid nor the driver's
dependencies), and the same module objects' behaviour under either name."""

from __future__ import annotations

import subprocess
import sys

from claimgrid import ROOT
from frameworks._harness.harness_shared import harness_control, probe_kinds

HARNESS = ROOT / "frameworks" / "_harness"
MODULES = sorted(p.stem for p in (HARNESS / "harness_shared").glob("*.py") if p.stem != "__init__")

# Run as an adapter process imports it: only the harness folder on the path, isolated mode.
PROBE = """
import sys
before = set(sys.modules)
sys.path.insert(0, sys.argv[1])
import importlib
for name in sys.argv[2:]:
    importlib.import_module("harness_shared." + name)
new = {m.split(".")[0] for m in set(sys.modules) - before}
print(" ".join(sorted(m for m in new if m != "harness_shared" and m not in sys.stdlib_module_names)))
"""


def test_the_shared_package_imports_only_the_standard_library():
    assert {"harness_control", "probe_kinds", "readback"} <= set(MODULES)
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(HARNESS), *MODULES], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"harness_shared imports outside the standard library: {out.stdout}"


def test_the_driver_imports_the_adapters_file_itself_and_holds_no_copy():
    shared = HARNESS / "harness_shared"
    assert probe_kinds.__file__ == str(shared / "probe_kinds.py")
    assert harness_control.__file__ == str(shared / "harness_control.py")
    harness = {p.read_bytes(): p for p in HARNESS.rglob("*.py") if p.stat().st_size}
    copies = [
        f"{p} == {harness[p.read_bytes()]}" for p in (ROOT / "claimgrid").rglob("*.py") if p.read_bytes() in harness
    ]
    assert copies == []
