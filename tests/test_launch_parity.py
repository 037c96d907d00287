"""Warm (forked) and fresh runs of a deterministic fake adapter give the same evidence."""

from __future__ import annotations

import sys

from claimgrid.launch import Launcher
from tests.fixtures.frameworks.launch_helpers import fake_entries, make_ctl

VOLATILE = {"t", "wall_s", "harness_cpu_s"}  # timings and CPU differ between any two runs


def _strip(obj, roots):
    if isinstance(obj, dict):
        return {k: _strip(v, roots) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v, roots) for v in obj]
    if isinstance(obj, str):
        for root in roots:
            obj = obj.replace(root, "<tmp>")
    return obj


def test_warm_and_fresh_agree(tmp_path):
    seen = {}
    for mode in ("fresh", "warm"):
        ctl = make_ctl(tmp_path / mode, "good", run_id="r-same")
        with Launcher(fake_entries(), mode, python=sys.executable) as launcher:
            res = launcher.launch("fake", ctl, timeout_s=30)
        assert res.outcome_status == "ok"
        outcome = dict(res.outcome)
        harness = outcome.pop("harness")
        assert harness["isolation"] == mode and harness["tool_calls"] == 6
        seen[mode] = _strip({"outcome": outcome, "tools": res.tool_events}, [str(tmp_path / mode)])
    assert seen["fresh"] == seen["warm"]
    assert seen["warm"]["outcome"]["versions"] == {"fake": "1.0", "preloaded": True}
    assert [e["changed_workspace"] for e in seen["warm"]["tools"]] == [False, False, True, True, False, False]
