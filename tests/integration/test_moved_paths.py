"""The previous release's import paths keep working for this release: each old module path
gives the very module at its new path, with one DeprecationWarning naming the new path."""

import importlib
import subprocess
import sys

import pytest

from claimgrid import ROOT
from claimgrid._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_new_module_with_a_warning(old):
    # A fresh interpreter: in this one the old name may already sit in sys.modules.
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "assert old is new, (old, new)\n"
        "msgs = [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)]\n"
        f"assert any({MOVED[old]!r} in m for m in msgs), msgs\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_new_path_exists():
    for new in MOVED.values():
        importlib.import_module(new)


def test_a_policy_file_written_against_the_old_paths_still_registers(tmp_path):
    policy = tmp_path / "old_style.py"
    policy.write_text(
        "from claimgrid.gateway.policies import register_behaviour\n"
        "from claimgrid.gateway.script import Step\n"
        "from claimgrid.reference_truth import Behaviour\n"
        "def plan(script, seen):\n"
        "    return [Step('read_file', {'path': script.content_slot})]\n"
        "register_behaviour('old-style-reader', Behaviour(plan=plan, report='truthful'), 'reads the slot')\n"
    )
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from claimgrid.reference import load_policies, registry\n"
        f"print(load_policies({str(policy)!r}))\n"
        "assert registry.is_reference('old-style-reader')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "old-style-reader" in proc.stdout
