"""The driver's side of real-model grids: spend limits and provider retries from the
command line (or, on ``--resume``, from the grid's meta.json), the meta keys they write,
and the record of a stop at budget. The running totals themselves live in the gateway
(claimgrid.gateway.budget.Spend); the scheduler (claimgrid.commands.run) asks them before each run.
"""

from __future__ import annotations

import datetime as dt

from claimgrid.errors import ClaimgridError


def real_model_options(args, meta: dict | None):
    """``(Limits, RetryPolicy)`` from the flags, falling back to ``meta`` on ``--resume``."""
    return _budget_from(args, meta), _retry_from(args, meta)


def budget_meta(limits, retry) -> dict:
    """The real-model keys of a new grid's meta.json (docs/CONTRACTS.md, "Grid meta")."""
    return {"budget": limits.as_dict(), "provider_retry": retry.as_dict(), "spend": None, "stopped_at_budget": None}


def resume_budget_meta(meta: dict, limits, retry) -> None:
    """On ``--resume``: an earlier stop becomes history (``budget_stops``); the limits may be new."""
    if meta.get("stopped_at_budget"):
        meta.setdefault("budget_stops", []).append(meta["stopped_at_budget"])
    meta["stopped_at_budget"] = None
    meta["budget"], meta["provider_retry"] = limits.as_dict(), retry.as_dict()


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


def _budget_from(args, meta: dict | None):
    """The grid's spend limits: the flags, else (on --resume) the limits the grid had."""
    from claimgrid.gateway.budget import Limits

    old = (meta or {}).get("budget") or {}
    max_cost = args.max_cost if args.max_cost is not None else old.get("max_cost_usd")
    max_tokens = args.max_tokens if args.max_tokens is not None else old.get("max_tokens")
    if max_cost is not None and max_cost <= 0:
        raise ClaimgridError("--max-cost must be a positive number of US dollars")
    if max_tokens is not None and max_tokens <= 0:
        raise ClaimgridError("--max-tokens must be a positive number of tokens")
    return Limits(max_cost, max_tokens)


def _retry_from(args, meta: dict | None):
    from claimgrid.gateway.retry import RetryPolicy

    old = (meta or {}).get("provider_retry") or {}
    retries = args.provider_retries if args.provider_retries is not None else old.get("retries", RetryPolicy.retries)
    backoff = (
        args.provider_backoff if args.provider_backoff is not None else old.get("backoff_s", RetryPolicy.backoff_s)
    )
    if retries < 0:
        raise ClaimgridError("--provider-retries must be 0 or more")
    if backoff < 0:
        raise ClaimgridError("--provider-backoff must be 0 or more seconds")
    timeout = (
        args.provider_timeout if args.provider_timeout is not None else old.get("timeout_s", RetryPolicy.timeout_s)
    )
    if timeout <= 0:
        raise ClaimgridError("--provider-timeout must be a positive number of seconds")
    return RetryPolicy(retries=retries, backoff_s=backoff, timeout_s=timeout)


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
