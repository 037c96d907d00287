"""The ledger: what a grid run measured, as publishable markdown, a picture and tables.

Public API:

- :func:`render_ledger` ``(ledger_dir) -> Path``: read ``runs.jsonl`` + ``meta.json`` +
  each run's evidence folder, write ``LEDGER.md``, ``RUNS.md``, ``ledger.html``,
  ``heatmap.png`` and ``runs/<id>/RUN.md``; return the LEDGER.md path. An incomplete grid (partial or truncated ``runs.jsonl``) is rendered
  with the planned and present run counts stated.
- :func:`headline_table` ``(ledger_dir) -> rich.table.Table | str``: the headline
  (swap = none) per model (a string when there are no runs).
- :func:`wilson` ``(k, n, z=1.96) -> (low, high) | None``.

Bad input raises :class:`claimgrid.errors.DataError` (one line naming the file/field).
"""

from __future__ import annotations

from pathlib import Path

from claimgrid.errors import ClaimgridError
from claimgrid.ledger.load import Ledger, load_ledger
from claimgrid.ledger.stats import format_rate, wilson

__all__ = ["render_ledger", "headline_table", "wilson", "format_rate", "load"]

HEATMAP = "heatmap.png"


def _roles() -> dict[str, str]:
    """Task id -> role from the task folder; empty if the tasks cannot be loaded.

    Records normally carry ``role``; this only fills in older records.
    """
    try:
        from claimgrid.inputs.tasks import load_tasks
        return {tid: t.role for tid, t in load_tasks().items()}
    except (ClaimgridError, OSError):
        return {}


def _carries() -> dict[str, str | None]:
    """Content condition -> what it carries, from conditions/; fills in records without ``facts``."""
    try:
        from claimgrid.inputs.conditions import load_content_conditions
        return {name: c.carries for name, c in load_content_conditions().items()}
    except (ClaimgridError, OSError):
        return {}


def _checks() -> dict[str, tuple[dict | None, dict | None]]:
    """Task id -> (attacker-goal check, owner's-note check), for the paired metrics."""
    try:
        from claimgrid.inputs.tasks import load_tasks
        return {tid: (t.spec.attacker_goal.check.model_dump() if t.spec.attacker_goal else None,
                      t.spec.legitimate_note.check.model_dump() if t.spec.legitimate_note else None)
                for tid, t in load_tasks().items()}
    except (ClaimgridError, OSError, AttributeError):
        return {}


def _swap_specs() -> dict:
    """Swap conditions from today's conditions/: only for ledgers whose meta.json predates them."""
    try:
        from claimgrid.inputs.conditions import load_swap_conditions
        return {n: {"unavailable_from_call": c.unavailable_from_call, "on_unavailable": c.on_unavailable,
                    "reported_name": c.reported_name} for n, c in load_swap_conditions().items()}
    except (ClaimgridError, OSError):
        return {}


def load(ledger_dir: Path, on_run=None) -> Ledger:
    """The ledger folder as a :class:`~claimgrid.ledger.load.Ledger` (flat polars frame + meta)."""
    return load_ledger(Path(ledger_dir), _roles(), _carries(), _checks(), on_run)


def render_ledger(ledger_dir: Path) -> Path:
    """Write LEDGER.md, RUNS.md, ledger.html, heatmap.png and every ``runs/<id>/RUN.md``
    into ``ledger_dir``; return LEDGER.md's path. A pure function of the stored evidence:
    rendering twice gives byte-identical files."""
    from claimgrid.ledger.heatmap import write_heatmap  # matplotlib is only imported when a picture is drawn
    from claimgrid.ledger.html import render_html
    from claimgrid.ledger.pages import Pages, write_run_md
    from claimgrid.ledger.report import Report
    from claimgrid.ledger.rules import explain

    ledger_dir = Path(ledger_dir)
    pages = Pages()

    def on_run(rec, events, patch, digest):
        rules = explain(rec, events)  # once per run: RUN.md and ledger.html show the same rules
        write_run_md(ledger_dir, rec, events, digest, rules)
        pages.add(rec, events, patch, rules)

    ledger = load(ledger_dir, on_run)
    report = Report(ledger, HEATMAP, _swap_specs())
    heatmap_path = ledger_dir / HEATMAP
    if write_heatmap(report, heatmap_path) is None:
        report.heatmap_name = None
        heatmap_path.unlink(missing_ok=True)
    out = ledger_dir / "LEDGER.md"
    # Write-then-rename: a reader (or a crash) never sees half a ledger.
    for name, text in (("RUNS.md", report.runs_md()), ("ledger.html", render_html(report, pages)),
                       ("LEDGER.md", report.render())):
        tmp = ledger_dir / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(ledger_dir / name)
    return out


def headline_table(ledger_dir: Path):
    """The headline (swap = none) as a rich Table: per model, utility and false success on clean content."""
    from rich.table import Table

    from claimgrid.ledger.report import Report

    report = Report(load(ledger_dir), None, _swap_specs())
    rows = report.headline_rows()
    if not rows:
        return "No runs in this ledger yet."
    t = Table(title="Headline, swap = none (LEDGER.md section 2)", caption=report.coverage_line())
    split = len(report.groups) > 1
    for h in (*(["parity group"] if split else []), "model", "frameworks", "utility, clean", "false success among claims, clean",
              *[f"paired attack success, {c}" for c in report.injected]):
        t.add_column(h)
    for h in rows:
        t.add_row(*([h["group"]] if split else []), h["model"], h["frameworks"], format_rate(*h["utility_clean"], report.interval(h["model"])),
                  format_rate(*h["fs_clean"], report.interval(h["model"])),
                  *[format_rate(*h["asr"][c][:2], report.interval(h["model"])) for c in report.injected])
    return t
