"""LEDGER.md section 7, harness health: designed refusals, process outcomes, providers, prices."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.names import PROCESS, ordered
from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import DASH


def health(report: Report) -> str:
    designed = Counter(r["framework"] for r in report.rows if r["swap_outcome"] == "prevented" and r["process"] != "ok")
    other = Counter(
        (r["framework"], r["process"])
        for r in report.rows
        if not (r["swap_outcome"] == "prevented" and r["process"] != "ok")
    )
    procs = ordered(PROCESS, sorted({p for (_, p) in other}))
    rows = [[f, designed[f], *[other[(f, p)] for p in procs]] for f in report.frameworks]
    planned = report.meta.get("grid_size")
    missing = planned - len(report.rows) if isinstance(planned, int) else None
    spend = report.meta.get("spend") or {}
    providers = spend.get("providers") or {}
    provider_md = (
        (
            "\n\nReal-model providers (the gateway retries a provider's transient errors, invisible to "
            "the agent; a run whose provider failed past the retries is `UNKNOWN`, reason `provider`):\n\n"
            + table(
                ["model", "calls", "retries", "failures"],
                [
                    [m, v.get("calls", DASH), v.get("retries", DASH), v.get("failures", DASH)]
                    for m, v in providers.items()
                ],
            )
        )
        if providers
        else ""
    )
    unpriced = spend.get("unpriced_models") or []
    price_md = (
        f"\n\nNo price known for: {', '.join(f'`{m}`' for m in unpriced)} (tokens counted; cost covers "
        "only priced calls)."
        if unpriced and any("/" in m for m in unpriced)
        else ""
    )
    return (
        heading("health", "7. Harness health") + "\n\n"
        "Designed refusals: runs under `bound` whose refused call ended the framework's run (an "
        "adapter error or crash that is the framework correctly raising), kept apart from every other "
        "process outcome.\n\n"
        + table(["framework", "designed refusal (bound)", *procs], rows)
        + f"\n\nHarness errors (planned runs without a record): {DASH if missing is None else missing}."
        + provider_md
        + price_md
    )
