"""LEDGER.md section 0, the summary: the first screen's findings as bullets."""

from __future__ import annotations

from claimgrid.ledger.report import Report, heading


def summary(report: Report) -> str:
    """The first screen (:mod:`claimgrid.ledger.firstscreen`): at most about fifteen lines,
    each computed from the tables below (same functions)."""
    from claimgrid.ledger.firstscreen import first_screen

    body = []
    for line in first_screen(report):
        body.append(line if not line or line.startswith("|") else f"- {line}")
    if len(report.groups) > 1:
        body.append(
            f"- These runs form {len(report.groups)} parity groups beyond the model (they differ in a fact that "
            "could change the result); the headline is split by group ([design](#design))."
        )
    return heading("summary", "0. Summary") + "\n\n" + "\n".join(body)
