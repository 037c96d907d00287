"""LEDGER.md and RUNS.md from one :class:`~claimgrid.ledger.report.Report` (the computed tables).

Public face: :func:`ledger_md` ``(report) -> str`` (LEDGER.md: title, then one module per
section in the order a reader needs it: :mod:`.summary`, :mod:`.design`, :mod:`.headline`,
:mod:`.divergence`, :mod:`.swapped`, :mod:`.detection`, :mod:`.claim_judge` (only with a claim judge),
:mod:`.calibration`, :mod:`.health`,
:mod:`.reproducibility`, :mod:`.appendix`) and :func:`runs_md` ``(report) -> str`` (RUNS.md,
:mod:`.runs_table`). Each section is a function of the report's typed findings; none
computes a number another section shows differently.

Modules:

* ``appendix`` - LEDGER.md section 9, the appendix: links, framework versions, runtime settings,
  parity groups;
* ``audit_screen`` - The first screen of an audit's LEDGER.md (``grid.py audit DIR``, meta.json
  ``audit``): per agent × model, the runs, the success claims, the false successes among them with
  their Wilson interval, the honest failures and the runs that could not be read; then why each
  unreadable run could not be, and the sentence that decided each claim (false successes first);
* ``claim_judge`` - LEDGER.md's claim judge section: a model's reading of each report beside the
  deterministic reader's;
* ``calibration`` - LEDGER.md section 6, calibration: each classification field against the
  reference truth;
* ``design`` - LEDGER.md section 1, the design: what varied, the plan, the configured and observed
  swap, the guard, the verifier's cache, the parity groups, and where each task comes from;
* ``detection`` - LEDGER.md section 5, the detector evaluation: the claim check against the
  verifier's outcome;
* ``divergence`` - LEDGER.md section 3, framework divergence: the cells whose classifications
  differ, the per-framework figures, the paired framework tests and what each framework does with a
  fault;
* ``headline`` - LEDGER.md section 2, the headline: swap = none, per model x framework block;
* ``health`` - LEDGER.md section 7, harness health: designed refusals, process outcomes, providers,
  prices;
* ``reproducibility`` - LEDGER.md section 8, reproducibility: the facts a re-run needs;
* ``runs_table`` - RUNS.md: one row per cell, frameworks side by side;
* ``summary`` - LEDGER.md section 0, the summary: the first screen's findings as bullets;
* ``swapped`` - LEDGER.md section 4, the swap: the treatment each run received and what the fired
  runs show.
"""

from __future__ import annotations

import re

from claimgrid.caps import LEDGER_SECTION_LINES
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

__all__ = ["details_md", "headline", "ledger_md", "runs_md", "summary"]


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
    folded = [fold(s) for s in details_sections(report)]
    parts = [
        title,
        # An audit of runs made elsewhere (grid.py audit) opens with its own first screen.
        *([audit_first_screen(report)] if report.meta.get("audit") else []),
        summary(report),
        design(report),
        headline(report),
        *(short for short, _ in folded),
    ]
    text = "\n\n".join(parts) + "\n"
    # A link to an anchor that moved with its section (e.g. #paired-tests) goes to DETAILS.md.
    kept = set(re.findall(r'<a id="([^"]+)"></a>', text))
    moved = {a for _, full in folded if full for a in re.findall(r'<a id="([^"]+)"></a>', full)} - kept
    if moved:
        text = re.sub(
            r"\]\(#([\w-]+)\)", lambda m: f"]({DETAILS}#{m.group(1)})" if m.group(1) in moved else m.group(0), text
        )
    return text


# Sections that may move to DETAILS.md when long; the summary, design and headline never do.
def details_sections(report: Report) -> list[str]:
    return [
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


DETAILS = "DETAILS.md"


def fold(section: str) -> tuple[str, str | None]:
    """(what LEDGER.md shows, what DETAILS.md holds or None). A section longer than
    caps.LEDGER_SECTION_LINES keeps its heading and first paragraph, then one line linking to
    the whole section in DETAILS.md (same anchor); a shorter one stays whole in LEDGER.md."""
    lines = section.splitlines()
    if len(lines) <= LEDGER_SECTION_LINES:
        return section, None
    anchor = re.match(r'<a id="([^"]+)"></a>', lines[0])
    head = lines[:2] if anchor else lines[:1]
    rest = lines[len(head) :]
    while rest and not rest[0].strip():
        rest = rest[1:]
    first: list[str] = []
    for line in rest:
        if not line.strip() or line.startswith(("|", "#", "<a id=")):
            break
        first.append(line)
    target = f"{DETAILS}#{anchor.group(1)}" if anchor else DETAILS
    short = "\n".join(
        [*head, "", *first, "", f"The whole section ({len(lines)} lines, every table) is in [{DETAILS}]({target})."]
    )
    return short, section


def details_md(report: Report) -> str:
    """DETAILS.md: the long sections of LEDGER.md whole (:func:`fold`), links to LEDGER.md's
    sections rewritten to point there."""
    moved = [full for s in details_sections(report) if (full := fold(s)[1]) is not None]
    title = f"# claimgrid ledger {report.meta.get('grid_id', report.L.folder.name)}: details"
    if not moved:
        return title + "\n\nEvery section fits in [LEDGER.md](LEDGER.md).\n"
    here = {m.group(1) for s in moved for m in re.finditer(r'<a id="([^"]+)"></a>', s)}
    body = re.sub(
        r"\]\(#([\w-]+)\)",
        lambda m: m.group(0) if m.group(1) in here else f"](LEDGER.md#{m.group(1)})",
        "\n\n".join(moved),
    )
    return title + "\n\nThe sections of [LEDGER.md](LEDGER.md) too long for it, whole.\n\n" + body + "\n"


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
