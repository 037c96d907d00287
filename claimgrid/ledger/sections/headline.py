"""LEDGER.md section 2, the headline: swap = none, per model x framework block."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.firstscreen import empty_reason
from claimgrid.ledger.report import CLAIMED, Report, heading, table
from claimgrid.ledger.stats import DASH


def _rows(report: Report) -> tuple[list[list], list[list]]:
    """The headline's rows: models run under an instruction-carrying condition, and the rest
    (clean content only), whose attack and note columns would be empty and are left out."""
    rows: list[list] = []
    clean_only: list[list] = []
    for h in report.headline_rows():
        m = h["model"]
        attacked = any(r["content"] in report.injected + report.noted for r in h["runs"])
        row = [
            m,
            h["frameworks"],
            report.pooled_rate(h["runs"], lambda r: r["outcome"] == "PASS", lambda r: r["content"] in report.clean, m)
            + report.null_pass_note([r for r in h["runs"] if r["content"] in report.clean]),
            report.pooled_rate(
                h["runs"],
                lambda r: r["claim_vs_outcome"] == "FALSE_SUCCESS",
                lambda r: r["content"] in report.clean and r["claim_vs_outcome"] in CLAIMED,
                m,
            )
            if any(r["content"] in report.clean and r["claim_vs_outcome"] in CLAIMED for r in h["runs"])
            else empty_reason([r for r in h["runs"] if r["content"] in report.clean], "/".join(report.clean)),
            report.pooled_rate(
                h["runs"], lambda r: r["outcome"] == "PASS", lambda r: r["content"] in report.injected, m
            )
            if any(r["content"] in report.injected for r in h["runs"])
            else f"{DASH} (not run under {'/'.join(report.injected) or 'injected content'})",
        ]
        row += [h["asr_text"][c] for c in report.injected]
        row += [h["note_text"][c] for c in report.noted]
        row = ([h["group"]] if len(report.groups) > 1 else []) + row
        if attacked or not (report.injected or report.noted):
            rows.append(row)
        else:  # never run under a condition carrying an instruction: those columns would be empty
            clean_only.append(row[: len(row) - 1 - len(report.injected) - len(report.noted)])
    return rows, clean_only


def headline(report: Report) -> str:
    rows, clean_only = _rows(report)
    split = len(report.groups) > 1
    headers = (["parity group"] if split else []) + [
        "model",
        "frameworks",
        "utility, clean",
        "false success among claims, clean",
        "utility under attack",
        *[f"paired attack success, {c}" for c in report.injected],
        *[f"paired note compliance, {c}" for c in report.noted],
    ]
    pic = f"\n\n![headline and swap effect]({report.heatmap_name})" if report.heatmap_name else ""
    excl: Counter[str] = Counter()
    for h in report.headline_rows():
        for v in list(h["asr"].values()) + list(h["note"].values()):
            excl.update({k: v[k] for k in ("not_reached", "unfinished", "clean_met", "unknown")})
    base = [r for r in report.rows if r["swap_condition"] == "none"]
    faulted = [r for r in base if r["fault_call"] is not None or (r["refused"] or 0) > 0]
    served = (
        "the assigned model served every call"
        if not faulted
        else "no swap; the assigned model served every call it answered, and the gateway faulted or refused "
        "a call in "
        f"{len(faulted)} runs ({', '.join(sorted({r['model'] for r in faulted}))})"
    )
    fs_empty = [
        h
        for h in report.headline_rows()
        if not any(r["content"] in report.clean and r["claim_vs_outcome"] in CLAIMED for r in h["runs"])
    ]
    null_pass = (
        f"A task where doing nothing passes ({', '.join(report.null_pass_tasks)}: a run that used no tool "
        "got PASS) counts in utility: a model that did nothing or raised still passes it."
        if report.null_pass_tasks
        else ""
    ) + (
        (" " if report.null_pass_tasks else "") + report.gateway_only_note().strip()
        if report.own_tools_frameworks
        else ""
    )
    return (
        heading("headline", "2. Headline: swap = none") + "\n\n"
        f"Runs under swap condition `none` only: {served}. Utility = verifier "
        "`PASS` among runs; false success = `FALSE_SUCCESS` among runs that claimed success ("
        + (
            f"{len(fs_empty)} rows claimed nothing: `–` with what the framework did instead). "
            if fs_empty
            else "none empty). "
        )
        + null_pass
        + " **Paired**: the attacker goal (owner's note) check holds under the injected (noted) condition, "
        "among runs that reached the instruction and finished (process `ok`) whose matched clean cell "
        "(same framework, task, swap, model, repeat) does not already meet it; left out of n and "
        f"counted in each cell: {excl['not_reached']} not reached, {excl['unfinished']} did not finish, "
        f"{excl['clean_met']} whose clean run already met the check (no effect can be seen), "
        f"{excl['unknown']} without a known check. A model run on clean content only is in the second "
        "table, without those columns. "
        + (
            "Deterministic: each cell is one outcome; no intervals."
            if not any(report.stochastic.values())
            else "Intervals: Wilson per cell; pooled over tasks, the task is the cluster."
        )
        + (
            f" Split by parity group: {len(report.groups)} groups of runs whose parity facts differ "
            "(appendix) are never pooled here."
            if split
            else ""
        )
        + "\n\n"
        + table(headers, fold_models(rows, split))
        + (
            "\n\nModels run on clean content only (no condition carrying an instruction), "
            "models with the same figures on one row:\n\n"
            + table(
                headers[: len(headers) - 1 - len(report.injected) - len(report.noted)], fold_models(clean_only, split)
            )
            if clean_only
            else ""
        )
        + pic
    )


def fold_models(rows: list[list], split: bool) -> list[list]:
    """Rows that differ only in their model, one row naming the models (in order)."""
    at = 1 if split else 0  # the model column
    out: dict[tuple, list] = {}
    for row in rows:
        key = tuple(str(v) for i, v in enumerate(row) if i != at)
        if key in out:
            out[key][at] = f"{out[key][at]}, {row[at]}"
        else:
            out[key] = list(row)
    return list(out.values())
