"""Warm (forked) and fresh runs of a deterministic fake adapter give the same evidence."""

from __future__ import annotations

import sys

from claimgrid import ROOT
from claimgrid.inputs.venvs import harness_env, load_venvs
from claimgrid.launch import Launcher

from tests.fixtures.frameworks.launch_helpers import fake_entries, make_ctl

VOLATILE = {"t", "wall_s", "harness_cpu_s", "ended_unix", "took_s"}  # timings and CPU differ between any two runs


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


ENVPROBE = ROOT / "tests" / "fixtures" / "frameworks" / "envprobe"


def test_fresh_and_warm_runs_start_with_the_same_environ(tmp_path):
    """A framework registered like any other (a venvs.toml entry, with its own env) sees
    the same os.environ when its run() starts, fresh or forked from the warm parent: the
    harness's paths and its one table, the entry's env, and what the adapter's import and
    preload() set; per-run values are paths under the run's own sandbox."""
    venvs = tmp_path / "venvs.toml"
    venvs.write_text(
        f'[frameworks.envprobe]\npython = "3.11"\nproject = "{ENVPROBE}"\n'
        f'adapter = "{ENVPROBE}/adapter.py"\n'
        'env = { ENVPROBE_TELEMETRY = "off", ENVPROBE_STORE = "{sandbox}/envprobe" }\n'
    )
    entries = load_venvs(venvs)
    seen = {}
    for mode in ("fresh", "warm"):
        ctl = make_ctl(tmp_path / mode, "good", run_id="r-env")
        with Launcher(entries, mode, python=sys.executable) as launcher:
            res = launcher.launch("envprobe", ctl, timeout_s=30)
        assert res.outcome_status == "ok" and res.outcome["error"] is None, res.outcome
        (event,) = [e for e in res.outcome["events"] if e["kind"] == "environ"]
        environ = event["environ"]
        # The per-run values are paths under the run's own sandbox, the same in form.
        assert environ["HOME"] == f"{ctl['sandbox']}/home"
        assert environ["ENVPROBE_STORE"] == f"{ctl['sandbox']}/envprobe"
        seen[mode] = _strip(environ, [str(tmp_path / mode)])
    environ = seen["fresh"]
    assert {k: environ.get(k) for k in harness_env()} == harness_env()  # the one table, all of it
    assert environ["ENVPROBE_TELEMETRY"] == "off"  # the entry's own env
    # What the adapter's import and preload() set stays, in a warm child as in a fresh process.
    assert environ["ENVPROBE_SET_AT_IMPORT"] == environ["ENVPROBE_SET_IN_PRELOAD"] == "1"
    assert seen["fresh"] == seen["warm"], {
        k: (seen["fresh"].get(k), seen["warm"].get(k))
        for k in set(seen["fresh"]) | set(seen["warm"])
        if seen["fresh"].get(k) != seen["warm"].get(k)
    }
