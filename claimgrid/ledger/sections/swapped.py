"""LEDGER.md section 4, the swap: the treatment each run received and what the fired runs show."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.report import TREAT_FIRED, TREAT_NOOP, TREAT_NOT_REACHED, TREAT_UNKNOWN, Report, heading, table
from claimgrid.ledger.stats import DASH


def swap(report: Report) -> str:
    """Section 4: the treatment each swapped run received; for the fired runs, who wrote the
    false successes (substitute), what a refused call led to (bound) and which channel exposed it."""
    out = [heading("swap", "4. Swap")]
    swapped = [r for r in report.rows if r["swap_condition"] != "none"]
    if not swapped:
        return out[0] + "\n\nNo run under a swap condition."
    out += _treatments(report, swapped)
    subs = [
        r
        for r in swapped
        if r["treatment"] == TREAT_FIRED
        and (report.swap_specs.get(r["swap_condition"]) or {}).get("on_unavailable") == "substitute"
    ]
    if subs:
        out.append(_writers(report, subs))
    bound = [r for r in swapped if r["treatment"] == TREAT_FIRED and r["swap_outcome"] == "prevented"]
    if bound:
        out += _bound(report, bound)
    if subs:
        out.append(_ladder(report, subs))
    return "\n\n".join(out)


def _treatments(report: Report, swapped: list[dict]) -> list[str]:
    """The treatment table, and the runs listed but not counted as swapped."""
    out: list[str] = []
    treats = [TREAT_FIRED, TREAT_NOT_REACHED, TREAT_NOOP, TREAT_UNKNOWN]
    rows = []
    for s in report.swaps:
        for m in report.models:
            for label, runs in report.fw_blocks([r for r in swapped if r["swap_condition"] == s and r["model"] == m]):
                t = Counter(r["treatment"] for r in runs)
                rows.append([s, m, label, *[t[x] for x in treats]])
    out.append(
        "**Treatment actually received** (from the gateway log): fired = the gateway swapped or refused "
        "a call; not reached = the run ended before the swap call; no-op = the substitute is the "
        "assigned model. Only `fired` runs count as swapped below.\n\n"
        + table(["swap condition", "model", "frameworks", *treats], rows)
    )
    listed = Counter(
        (r["treatment"], r["swap_condition"], r["model"], r["framework"], r["calls"])
        for r in swapped
        if r["treatment"] in (TREAT_NOT_REACHED, TREAT_NOOP, TREAT_UNKNOWN)
    )
    if listed:
        out.append(
            "Listed, not counted as swapped:\n\n"
            + "\n".join(
                f"- {tr}: {m} under {s} on {fw}, {k} runs (model calls per run: {DASH if c is None else c})"
                for (tr, s, m, fw, c), k in sorted(listed.items(), key=lambda x: tuple(str(v) for v in x[0]))
            )
        )
    return out


def _writers(report: Report, subs: list[dict]) -> str:
    """False successes by the model that wrote the final report (fired substitute runs)."""
    rows = []
    for s in report.swaps:
        for m in report.models:
            for label, runs in report.fw_blocks([r for r in subs if r["swap_condition"] == s and r["model"] == m]):
                c = Counter(r["final_writer"] for r in runs if r["claim_vs_outcome"] == "FALSE_SUCCESS")
                rows.append(
                    [
                        s,
                        m,
                        label,
                        len(runs),
                        ", ".join(f"{w}: {k}" for w, k in sorted(c.items(), key=lambda x: str(x[0]))) or "none",
                    ]
                )
    return (
        "**False success attributed to the model that wrote the final report** (fired substitute "
        "runs; the writer is the gateway's `served_model` of the last answered call):\n\n"
        + table(
            [
                "swap condition",
                "assigned model",
                "frameworks",
                "fired runs",
                "false successes by report writer",
            ],
            rows,
        )
    )


def _bound(report: Report, bound: list[dict]) -> list[str]:
    """What a refused call led to (bound, fired): claimed success, and the evidence ladder."""
    out: list[str] = []
    rows = []
    for m in report.models:
        for label, runs in report.fw_blocks([r for r in bound if r["model"] == m]):
            if runs:
                rows.append(
                    [
                        m,
                        label,
                        report.rate(
                            sum(bool(r["claimed"]) for r in runs),
                            sum(r["claimed"] is not None for r in runs),
                            m,
                        ),
                        sum(r["runtime_errors"] or 0 for r in runs),
                    ]
                )
    out.append(
        "**Claimed success after a refused call** (bound, fired):\n\n"
        + table(["model", "frameworks", "claimed success", "runtime error events"], rows)
    )
    rows = []
    for f in report.frameworks:
        runs = [r for r in bound if r["framework"] == f]
        if runs:
            n = len(runs)
            rows.append(
                [
                    f,
                    n,
                    f"{sum((r['refused'] or 0) > 0 for r in runs)}/{n}",
                    f"{sum((r['runtime_errors'] or 0) > 0 for r in runs)}/{n}",
                    f"{sum(bool(r['swap_mentioned']) for r in runs)}/{n}",
                ]
            )
    out.append(
        "**Evidence ladder of a refused call** (bound, fired): the gateway's refusal (503), an error "
        "event in the framework's runtime, the agent's report mentioning it.\n\n"
        + table(["framework", "fired runs", "gateway refusal", "runtime error event", "agent's report"], rows)
    )
    return out


def _ladder(report: Report, subs: list[dict]) -> str:
    """Which channel exposed the swap, of fired substitute runs."""
    rows = []
    for f in report.frameworks:
        for s in report.swaps:
            runs = [r for r in subs if r["framework"] == f and r["swap_condition"] == s]
            if runs:
                n = len(runs)
                only_assigned = sum(
                    bool(r["transcript_names_assigned"]) and not r["transcript_names_substitute"] for r in runs
                )
                rows.append(
                    [
                        f,
                        s,
                        n,
                        *[
                            f"{sum(bool(r[c]) for r in runs)}/{n}"
                            for c in (
                                "gateway_exposes",
                                "runtime_names_substitute",
                                "transcript_names_substitute",
                            )
                        ],
                        f"{only_assigned}/{n}",
                        f"{sum(bool(r['swap_mentioned']) for r in runs)}/{n}",
                    ]
                )
    return (
        "**Evidence ladder**: which channel exposed the swap, of fired substitute runs (gateway: "
        "`served_model` ≠ assigned; runtime model name: the model name the framework read from the "
        "response; own transcript: the model the framework recorded in its transcript, or its errors; "
        "agent's report: the final text mentions it).\n\n"
        + table(
            [
                "framework",
                "swap condition",
                "fired runs",
                "gateway",
                "runtime model name",
                "framework's own transcript",
                "own transcript names only the assigned model",
                "agent's report",
            ],
            rows,
        )
    )
