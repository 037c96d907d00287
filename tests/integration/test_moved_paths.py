"""The previous release's import paths keep working for this release: each old module path
gives the very module at its new path, with one DeprecationWarning naming the new path."""

import importlib
import json
import subprocess
import sys

import pytest

from claimgrid import ROOT
from claimgrid._moved import MOVED


# One fresh interpreter for every old path (one per path was half a minute of CPU): no old
# name is in its sys.modules before the check imports it, as the shipped code imports only
# the new paths (each old name is imported once, first, and checked on its own).
_CHECK = """
import importlib, json, sys, warnings
moved = json.loads(sys.argv[1])
wrong = []
for old, new in sorted(moved.items()):
    if old in sys.modules:
        wrong.append(f"{old}: already imported before its check")
        continue
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = importlib.import_module(old)
    if got is not importlib.import_module(new):
        wrong.append(f"{old}: is not {new}")
    if not any(new in str(x.message) for x in w if issubclass(x.category, DeprecationWarning)):
        wrong.append(f"{old}: no DeprecationWarning naming {new}")
print(json.dumps(wrong))
"""


def test_old_path_is_the_new_module_with_a_warning():
    proc = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(MOVED)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert MOVED and json.loads(proc.stdout.splitlines()[-1]) == []


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
