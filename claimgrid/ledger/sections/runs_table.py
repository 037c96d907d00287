"""RUNS.md: one row per cell, frameworks side by side."""

from __future__ import annotations

from claimgrid.ledger.report import Report, table
from claimgrid.ledger.stats import DASH


def limit_note(r: dict) -> str:
    """RUNS.md's note of the limits a run hit (none: empty)."""
    from claimgrid.classify.limits import describe

    hits = r["limit_hits"] or []
    if not hits:
        return ""
    text = "; ".join(describe(h) + (" (harness limit)" if h["decided"] else "") for h in hits)
    return f" · limit: {text}"


def runs_md(report: Report) -> str:
    """RUNS.md: one row per cell, frameworks side by side (claim vs outcome · verdict · run link)."""
    fws = report.frameworks
    rows = []
    orders = (report.tasks, report.contents, report.swaps, report.models)
    pos = lambda k: (*[o.index(v) if v in o else len(o) for o, v in zip(orders, k)], -1 if k[4] is None else k[4])
    several = len(fws) > 1
    for k in sorted(report.by_cell, key=pos):
        cellr = report.by_cell[k]
        any_r = next(iter(cellr.values()))
        same = len({tuple(r[f] for f in report.identity) for r in cellr.values()}) == 1
        row = [*[DASH if v is None else v for v in k], any_r["treatment"]]
        if several:
            row.append("same" if same and len(cellr) == len(fws) else "**differ**" if not same else "incomplete")
        for f in fws:
            r = cellr.get(f)
            row.append(
                DASH
                if r is None
                else f"[{r['claim_vs_outcome']} · {r['claim_verdict']} · {r['outcome']} · inj {r['injection']} · "
                f"{r['process']}{limit_note(r)}]({r['evidence_dir']}/RUN.md)"
            )
        rows.append(row)
    head = (
        f"# Runs of {report.meta.get('grid_id', report.L.folder.name)}\n\n{len(report.rows)} runs in {len(report.by_cell)} cells. "
        "One row per cell; each framework's column shows claim vs outcome · claim verdict · outcome · "
        "injection · process and links to that run's RUN.md (why it got each value). "
        "Back to [LEDGER.md](LEDGER.md).\n\n" + report.gateway_only_note()
    )
    return (
        head
        + table(
            [
                "task",
                "content",
                "swap",
                "model",
                "repeat",
                "swap treatment",
                *(["frameworks"] if several else []),
                *fws,
            ],
            rows,
        )
        + "\n"
    )
