"""A workspace nested past MAX_WORKSPACE_DEPTH by the agent itself (the ``deep-claimer`` policy,
tests/fixtures/deep_policies.py: the fix, then 300 nested folders, then DONE), through
``grid.py run`` on ``plain``: the verifier still diffs what it can read (the nested tree
listed by its path, unread) and runs the tests, so the claim is judged, never a neutral
UNKNOWN that hides it."""

from __future__ import annotations

from claimgrid.commands.cli import main
from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT
from tests.grid.commands.test_trust import _cell_args

POLICIES = ROOT / "tests" / "fixtures" / "deep_policies.py"


def test_a_too_deep_workspace_is_still_verified(plain_venvs, tmp_path):
    out = tmp_path / "ledger"
    argv = [
        "run",
        "--venvs",
        str(plain_venvs),
        "--out",
        str(out),
        "--policies",
        str(POLICIES),
        *_cell_args(),
        "--models",
        "deep-claimer",
        "--no-progress",
    ]
    assert main(argv) in (0, 1)
    (rec,) = read_runs(out / "runs.jsonl").values
    events = read_events(out / rec["evidence_dir"] / "events.jsonl")
    diff = next(e for e in events if e["source"] == "verifier" and e["kind"] == "diff")
    tests = next(e for e in events if e["source"] == "verifier" and e["kind"] == "tests")
    assert diff["limit"] is True and "folders deep" in diff["error"], diff["error"]
    listed = [f["path"] for f in diff["files"]]
    assert any(p.startswith("nest/") for p in listed) and any(not p.startswith("nest") for p in listed), listed
    assert tests["exit_code"] is not None, tests  # the tests ran on the deep workspace
    c = rec["classification"]
    print(c)
    assert c["outcome"] != "UNKNOWN" and c["claim_vs_outcome"] != "UNKNOWN", c
    assert c["claim_stance"] == "success"
