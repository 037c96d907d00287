"""The driver's side of real-model grids: the record of a stop at budget, the line that
says so, and the note on models without a price. The limits are the grid spec's
(claimgrid.execute.spec.Budget); the running totals live in the gateway
(claimgrid.gateway.budget.Spend); the engine asks them before each run.
"""

from __future__ import annotations

import datetime as dt


def stop_record(reason: str, limits, spend, runs_done: int, runs_not_started: int) -> dict:
    """meta.json ``stopped_at_budget``: which limit, the limits, and the figures at the stop."""
    s = spend.snapshot()
    return {
        "limit": reason,
        **limits.as_dict(),
        "cost_usd": s["cost_usd"],
        "tokens": s["tokens"],
        "cost_complete": s["cost_complete"],
        "unpriced_models": s["unpriced_models"],
        "runs_done": runs_done,
        "runs_not_started": runs_not_started,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def stop_line(stop: dict, folder) -> str:
    return (
        f"stopped at budget ({stop['limit']}): spent ${stop['cost_usd']:.4f}, {stop['tokens']:,} tokens; "
        f"{stop['runs_not_started']} runs not started. Continue with a higher limit: "
        f"uv run grid.py run --resume {folder} --max-cost USD / --max-tokens N"
    )


def note_unpriced(limits, models: list[str]) -> None:
    """Say up front when --max-cost cannot see a model's spend (no known price)."""
    if limits.max_cost_usd is None:
        return
    # has_price imports LiteLLM only for a real model: a reference-only grid never does.
    from claimgrid.gateway.pricing import has_price

    unpriced = [m for m in dict.fromkeys(models) if not has_price(m)]
    if unpriced:
        print(
            f"note: no known price for {', '.join(unpriced)}: their calls count tokens only, "
            "not toward --max-cost (use --max-tokens to bound them)",
            flush=True,
        )
