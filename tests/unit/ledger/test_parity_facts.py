"""Parity facts that matter (issue 54 item 2): a machine path and a measured per-call deadline
that no run reached are provenance, never a reason to split runs; groups are labelled by the
fact that differs, never by the whole JSON."""

from __future__ import annotations

import json

import polars as pl

from claimgrid.ledger.parity import Parity, parity_value


def _budget(deadline: float) -> str:
    return json.dumps(
        {"max_model_calls": 3, "max_output_tokens": 64, "model_call_timeout_s": deadline},
        sort_keys=True,
        separators=(",", ":"),
    )


def _guard(path: str) -> str:
    return json.dumps(
        {"guard": "on", "bwrap": path, "bwrap_version": "bubblewrap 0.11.0"}, sort_keys=True, separators=(",", ":")
    )


def _runs(rows):
    return pl.DataFrame(
        rows,
        schema={
            "run_id": pl.String,
            "model": pl.String,
            "framework": pl.String,
            "parity.budget": pl.String,
            "parity.guard": pl.String,
        },
    )


def test_a_path_and_an_unreached_measured_deadline_are_provenance():
    assert 'bwrap"' not in parity_value("guard", _guard("/work/a/.venv/bin/bwrap"))
    assert parity_value("guard", _guard("/work/a/.venv/bin/bwrap")) == parity_value("guard", _guard("/home/b/bwrap"))
    # No run hit the per-call deadline: 890 s and 95 s are one condition; the call budget stays.
    unreached = frozenset({"output_cap"})
    assert parity_value("budget", _budget(890.0), unreached) == parity_value("budget", _budget(95.0), unreached)
    assert '"max_model_calls":3' in parity_value("budget", _budget(95.0), unreached)
    # A run that hit it: the deadline could have changed a result, so it is parity.
    reached = frozenset({"call_deadline"})
    assert parity_value("budget", _budget(890.0), reached) != parity_value("budget", _budget(95.0), reached)


def test_groups_merge_on_provenance_and_are_labelled_by_what_differs():
    rows = [
        {
            "run_id": "r1",
            "model": "m",
            "framework": "f",
            "parity.budget": _budget(890.0),
            "parity.guard": _guard("/work/a/.venv/bwrap"),
        },
        {
            "run_id": "r2",
            "model": "m",
            "framework": "f",
            "parity.budget": _budget(95.0),
            "parity.guard": _guard("/work/b/.venv/bwrap"),
        },
    ]
    merged = Parity(_runs(rows), ["budget", "guard"], frozenset({"output_cap"})).groups(exclude=("model",))
    assert [(g.id, g.label, g.runs.height) for g in merged] == [("P1", "all runs", 2)]
    split = Parity(_runs(rows), ["budget", "guard"], frozenset({"call_deadline"})).groups(exclude=("model",))
    assert sorted(g.label for g in split) == ["per-call deadline 890 s", "per-call deadline 95 s"]
