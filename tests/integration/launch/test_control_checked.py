"""Both sides check the control's declared shape (frameworks/_harness/harness_shared/harness_control.py): the
driver's launcher before anything is sent, the adapter's side on arrival (fresh mode here; the
warm child goes through the same ``harness_runtime.run_one``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from claimgrid import ROOT
from claimgrid.launch.launcher import Launcher
from frameworks._harness.harness_shared.harness_control import ControlError

from tests.fixtures.frameworks.launch_helpers import fake_entries, make_ctl


def test_the_launcher_refuses_a_control_off_its_shape_before_sending_it(tmp_path):
    ctl = make_ctl(tmp_path, "good")
    ctl["budgets"]["max_model_calls"] = "24"
    launcher = Launcher(fake_entries(), isolation="fresh", python=sys.executable)
    try:
        with pytest.raises(ControlError, match="max_model_calls"):
            launcher.launch("fake", ctl, timeout_s=20)
    finally:
        launcher.close()
    assert not (tmp_path / "sandbox" / "outcome.json").exists()


def test_the_adapter_side_refuses_a_control_off_its_shape(tmp_path):
    ctl = make_ctl(tmp_path, "good")
    del ctl["agent_name"]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "frameworks" / "_harness" / "run_adapter.py"),
            "--adapter-dir",
            str(ROOT / "tests" / "fixtures" / "frameworks" / "fake"),
        ],
        input=json.dumps(ctl).encode(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"ctl.agent_name: missing" in proc.stderr
    assert not (tmp_path / "sandbox" / "outcome.json").exists()
