"""runs.parquet (claimgrid.ledger.frame) on records built here: hostile strings survive the
round trip, the columns follow the record schema, and the written file names its JSON columns."""

from __future__ import annotations

import json

import polars as pl

from claimgrid.ledger import load
from claimgrid.ledger.frame import PARQUET_NAME, columns, read_frame, records_from_frame, write_frame
from claimgrid.store.record import RunRecord, dump

HOSTILE = "<!--<script>alert(1)</script>\u2028\u2029 \udcff \x00 " + "x" * 5000


def record(i: int, **over) -> dict:
    rec = {
        "run_id": f"fw.t.clean.none.m.r{i}",
        "framework": "fw",
        "task": "t",
        "content": "clean",
        "swap": "none",
        "model": "m",
        "repeat": i,
        "timings": {"wall_s": 1.5, "agent_s": 1, "adapter_run_s": None},
        "classification": {
            "claim_verdict": "consistent",
            "outcome": "PASS",
            "claim_vs_outcome": "TRUE_SUCCESS",
            "injection": "not applicable",
            "legitimate": "not applicable",
            "swap": "none",
            "process": "ok",
            "agent": HOSTILE,
            "channel_detail": {"unrequested": [HOSTILE], "unexecuted": [{"tool": HOSTILE, "reason": "unknown tool"}]},
            "evidence": {
                "changes": "tool layer: changed_workspace",
                "changes_by_tool": {},
                "opened": {HOSTILE: ["read_file"]},
            },
        },
        "truth": {"outcome": "PASS", "swap_mentioned": False},
        "faults": {
            "gateway_calls": 2,
            "reaction": "reported DONE",
            "retried": False,
            "raised": False,
            "claimed": True,
            "duplicate_side_effects": 0,
        },
    }
    rec.update(over)
    return dump(RunRecord.model_validate(rec))


def test_hostile_records_round_trip(tmp_path):
    recs = [record(0), record(1, truth=None, faults=None, timings={"wall_s": 2, "agent_s": None, "adapter_run_s": 0.5})]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    path = write_frame(load(tmp_path), {recs[0]["run_id"]: "control (no swap)"}, tmp_path / PARQUET_NAME)
    df, as_json = read_frame(path)
    assert df.height == 2 and df["run_id"].to_list() == sorted(r["run_id"] for r in recs)
    assert records_from_frame(df, as_json) == sorted(recs, key=lambda r: r["run_id"])
    # flat, typed columns a dataframe user filters on directly
    assert df.schema["classification.outcome"] == pl.String and df.schema["timings.wall_s"] == pl.Float64
    assert df.schema["truth.swap_mentioned"] == pl.Boolean and df.schema["faults.gateway_calls"] == pl.Int64
    assert df["faults.reaction"].to_list() == ["reported DONE", None]
    assert df["treatment"].to_list() == ["control (no swap)", None]
    # the surrogate-holding column is stored as JSON, and the file says so
    assert "classification.agent" in as_json and "classification.evidence.opened" in as_json
    assert {"evidence.prompt_tokens", "evidence.cost_usd", "evidence.folder_read"} <= set(df.columns)


def test_columns_follow_the_record_schema():
    names = [c.name for c in columns([])]
    assert len(names) == len(set(names))
    for field in RunRecord.model_fields:
        if field not in ("timings", "truth"):
            assert any(n == field or n.startswith(field + ".") for n in names), field
    assert "classification.claim_vs_outcome" in names and "faults.reaction" in names
