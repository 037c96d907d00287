"""runs.parquet beside the ledger of a real grid (the session's ``ledger_grid``): written by
``grid.py run``, one row per run, and the records back from it equal runs.jsonl's field for field."""

from __future__ import annotations

from claimgrid.ledger import load
from claimgrid.ledger.frame import PARQUET_NAME, read_frame, records_from_frame

from tests.ledger_support import records


def test_parquet_round_trips_every_record(ledger_grid):
    df, as_json = read_frame(ledger_grid / PARQUET_NAME)
    recs = sorted(records(ledger_grid), key=lambda r: r["run_id"])
    assert df.height == len(recs) and df["run_id"].to_list() == [r["run_id"] for r in recs]
    back = records_from_frame(df, as_json)
    for got, want in zip(back, recs, strict=True):
        assert got == want, got["run_id"]
    # the facts read from the evidence folders are the ledger's, run by run
    ledger = load(ledger_grid).runs.sort("run_id")
    for name in ("prompt_tokens", "completion_tokens", "cost_usd", "calls", "refused", "runtime_errors"):
        assert df[f"evidence.{name}"].to_list() == ledger[name].to_list(), name
    assert set(df["treatment"].to_list()) <= {
        "control (no swap)",
        "fired",
        "not reached",
        "no-op (substitute = assigned)",
        "unknown (no evidence)",
    }
    assert df["faults.reaction"].null_count() < df.height and df["timings.wall_s"].null_count() == 0
