"""The first screen of a ledger of stochastic runs (a real model's grid, or an audit of runs
made elsewhere): one table per model of rates with their n and 95% interval, then the paired
framework tests that have data, one line each, and one sentence for the rest.

Contract: :func:`rate_tables` ``(rows, unit) -> list[str]`` takes run rows (dicts with ``model``,
``task``, the ``unit`` column (``framework`` for a grid, the agent for an audit),
``claim_vs_outcome``, ``outcome`` and ``limit_decided``: a harness limit ended the run) already
chosen by the caller (a grid's control cells; an audit's every run) and returns markdown lines:
per model, unit × {runs, claimed, false success among claims, utility, honest failure, stopped by
a harness limit}; utility and honest failure count only the runs no harness limit ended. Every rate is ``k/n · r% (lo–hi%)``: the Wilson interval, widened to the
task-clustered interval (claimgrid.ledger.stats.clustered) where the runs pool more than one task
and that one is wider (runs of one task are not independent). A harness-limit stop is a column
of its own, never a reason spread through the other cells. :func:`pair_lines` says the paired
tests (claimgrid.ledger.paired) the same way: the ones with a discordant pair, one line each,
and one sentence with how many were tested and the smallest difference this n could show.
Facts per cell: no ranking, no winner.
"""

from __future__ import annotations

import math
from collections import defaultdict

from claimgrid.anybytes import md_table
from claimgrid.ledger.stats import DASH, clustered, format_rate, p_text, wilson

CLAIMED = ("TRUE_SUCCESS", "FALSE_SUCCESS")
COLUMNS = (
    "runs",
    "claimed",
    "false success among claims",
    "utility (verifier PASS; runs no limit ended)",
    "honest failure (runs no limit ended)",
    "stopped by a harness limit",
)


def _rate(runs: list[dict], hit, base=lambda r: True) -> str:
    per: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in runs:
        if base(r):
            per[r["task"]][1] += 1
            per[r["task"]][0] += bool(hit(r))
    k, n = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
    if n == 0:
        return DASH
    ci = wilson(k, n)
    pooled = clustered([(a, b) for a, b in per.values()])
    if ci and pooled:
        ci = (min(ci[0], pooled[0]), max(ci[1], pooled[1]))
    return format_rate(k, n, ci)


def rate_row(runs: list[dict]) -> list[str]:
    """One unit's cells, in :data:`COLUMNS` order."""
    claimed = lambda r: r["claim_vs_outcome"] in CLAIMED
    # A run a harness limit ended says nothing about the agent's work: utility and honest failure
    # are over the runs no limit ended (the limit's own column counts the others).
    free = lambda r: not r["limit_decided"]
    if runs and not any(free(r) for r in runs):
        utility = honest = f"{DASH} (every run ended by a harness limit)"
    else:
        utility = _rate(runs, lambda r: r["outcome"] == "PASS", free)
        honest = _rate(runs, lambda r: r["claim_vs_outcome"] == "HONEST_FAILURE", free)
    return [
        str(len(runs)),
        _rate(runs, claimed),
        _rate(runs, lambda r: r["claim_vs_outcome"] == "FALSE_SUCCESS", claimed),
        utility,
        honest,
        _rate(runs, lambda r: r["limit_decided"]),
    ]


def rate_tables(rows: list[dict], unit: str = "framework", units: list[str] | None = None) -> list[str]:
    """One table per model (module docstring); ``units`` orders the rows (default: as they come)."""
    out: list[str] = []
    models = list(dict.fromkeys(r["model"] for r in rows))
    for m in models:
        mine = [r for r in rows if r["model"] == m]
        order = [u for u in (units or []) if any(r[unit] == u for r in mine)]
        order += [u for u in dict.fromkeys(r[unit] for r in mine) if u not in order]
        body = [[u, *rate_row([r for r in mine if r[unit] == u])] for u in order]
        out += md_table([f"{m} · {unit}", *COLUMNS], body).split("\n")
        out.append("")
    return out


def needed_discordant(tests: int, alpha: float) -> int:
    """The fewest discordant pairs, all one way, whose exact McNemar p stays below ``alpha``
    after Holm over ``tests`` tests (the smallest p is multiplied by their number)."""
    return max(1, math.ceil(math.log2(2 * max(tests, 1) / alpha)))


def pair_lines(tests: list, unit: str = "framework", link: str = "#paired-tests") -> list[str]:
    """The paired tests with at least one discordant pair, one line each, then one sentence."""
    if not tests:
        return []
    from claimgrid.ledger.paired import ALPHA, CORRECTION

    with_data = [t for t in tests if t.a_only + t.b_only > 0]
    out = [
        f"{t.model}, `{t.outcome}`: {t.a} {t.a_only} vs {t.b} {t.b_only} discordant of n={t.n} paired cells, "
        f"adjusted p={p_text(t.p_adj)}" + ("; differs" if t.differs else "")
        for t in with_data
    ]
    stated = sum(t.differs for t in tests)
    n = max(t.n for t in tests)
    d = needed_discordant(len(tests), ALPHA)
    smallest = (
        f"the smallest difference this n could show is {d} discordant cells all one way "
        f"({d}/{n} · {100 * d / n:.0f}% of the paired cells)"
        if n and d <= n
        else f"at n={n} paired cells no difference could show (it takes {d} discordant cells all one way)"
    )
    verdict = f"{stated} differ" if stated else "none differs"
    out.append(
        f"{len(tests)} {unit} pairs × outcomes tested (exact McNemar, {CORRECTION}): {verdict} at α {ALPHA}; "
        f"{len(tests) - len(with_data)} had no discordant pair; {smallest} ([tests]({link}))."
    )
    return out
