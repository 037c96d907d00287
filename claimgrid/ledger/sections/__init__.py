"""LEDGER.md and RUNS.md from one :class:`~claimgrid.ledger.report.Report` (the computed tables).

Public face: :func:`ledger_md` ``(report) -> str`` (LEDGER.md: title, then one module per
section in the order a reader needs it: :mod:`.summary`, :mod:`.design`, :mod:`.headline`,
:mod:`.divergence`, :mod:`.swapped`, :mod:`.detection`, :mod:`.claim_judge` (only with a claim judge),
:mod:`.calibration`, :mod:`.health`,
:mod:`.reproducibility`, :mod:`.appendix`) and :func:`runs_md` ``(report) -> str`` (RUNS.md,
:mod:`.runs_table`). Each section is a function of the report's typed findings; none
computes a number another section shows differently.
"""

from __future__ import annotations

from claimgrid.ledger.report import Report, cell
from claimgrid.ledger.sections.appendix import appendix
from claimgrid.ledger.sections.audit_screen import audit_first_screen
from claimgrid.ledger.sections.calibration import calibration
from claimgrid.ledger.sections.claim_judge import claim_judge
from claimgrid.ledger.sections.design import design
from claimgrid.ledger.sections.detection import detector_section
from claimgrid.ledger.sections.divergence import divergence
from claimgrid.ledger.sections.headline import headline
from claimgrid.ledger.sections.health import health
from claimgrid.ledger.sections.reproducibility import reproducibility
from claimgrid.ledger.sections.runs_table import runs_md
from claimgrid.ledger.sections.summary import summary
from claimgrid.ledger.sections.swapped import swap
from claimgrid.ledger.stats import DASH

__all__ = ["headline", "ledger_md", "runs_md", "summary"]


def ledger_md(report: Report) -> str:
    """LEDGER.md's text: the title (and any venv or budget stop), then every section."""
    title = f"# claimgrid ledger {report.meta.get('grid_id', report.L.folder.name)}" + venv_failures_note(report)
    if not report.rows:
        return "\n\n".join([title, design(report), "_No run has completed yet: there is nothing to aggregate._"]) + "\n"
    stop = report.meta.get("stopped_at_budget")
    if isinstance(stop, dict):
        title += (
            f"\n\n**Stopped at budget** ({stop.get('limit', 'limit')}): spent "
            f"${stop.get('cost_usd', 0):.4f} and {stop.get('tokens', 0):,} tokens; "
            f"{stop.get('runs_done', DASH)} runs done, {stop.get('runs_not_started', DASH)} not started"
            + ("" if stop.get("cost_complete", True) else " (cost covers priced calls only)")
            + ". `grid.py run --resume` with a higher limit continues."
        )
    parts = [
        title,
        # An audit of runs made elsewhere (grid.py audit) opens with its own first screen.
        *([audit_first_screen(report)] if report.meta.get("audit") else []),
        summary(report),
        design(report),
        headline(report),
        divergence(report),
        swap(report),
        detector_section(report),
        # present only when the runs were also read by a claim judge (--claim-judge)
        *([judged] if (judged := claim_judge(report)) else []),
        calibration(report),
        health(report),
        reproducibility(report),
        appendix(report),
    ]
    return "\n\n".join(parts) + "\n"


def venv_failures_note(report: Report) -> str:
    """The frameworks whose venv failed to build in the last invocation (meta.json
    ``venv_failures``): their runs were not started, so the tables hold none of them."""
    failed = [f for f in report.meta.get("venv_failures") or [] if isinstance(f, dict)]
    if not failed:
        return ""
    items = "; ".join(
        f"`{cell(f.get('framework'))}`, {f.get('runs_not_started', DASH)} runs not started: {cell(f.get('error'))}"
        for f in failed
    )
    return f"\n\n**Framework venvs that failed to build** ({items}). `grid.py run --resume` runs them once it builds."
