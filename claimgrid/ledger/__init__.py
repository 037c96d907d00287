"""The ledger: what a grid run measured, as publishable markdown, a picture and tables.

Public API:

- :func:`render_ledger` ``(ledger_dir) -> Path``: read ``runs.jsonl`` + ``meta.json`` +
  each run's evidence folder, write ``LEDGER.md``, ``DETAILS.md`` (its long sections), ``RUNS.md``, ``ledger.html``,
  ``heatmap.svg``, ``runs.parquet`` (:mod:`.frame`) and ``runs/<id>/RUN.md``; return the LEDGER.md path. An incomplete grid (partial or truncated ``runs.jsonl``) is rendered
  with the planned and present run counts stated.
- :func:`headline_table` ``(ledger_dir) -> rich.table.Table | str``: the headline
  (swap = none) per model (a string when there are no runs).
- :func:`terminal_summary` ``(ledger_dir) -> list[str]``: the end-of-grid summary, lines of
  at most 80 columns naming LEDGER.md and ledger.html.
- :func:`wilson` ``(k, n, z=1.96) -> (low, high) | None``.

Bad input raises :class:`claimgrid.errors.DataError` (one line naming the file/field).

Modules:

* ``columns`` - The ledger's per-run columns, declared once;
* ``digest`` - Per-run facts the ledger reads from each run's stored evidence folder;
* ``exports`` - Exports other tools read: a ledger folder as Inspect eval logs or OpenTelemetry
  traces;
* ``facts`` - What the ledger needs to know about the grid's tasks and conditions, read from the
  folder;
* ``firstscreen`` - LEDGER.md's first screen: at most about fifteen lines, every figure computed
  from the tables;
* ``frame`` - runs.parquet: the ledger as a dataframe, one flat row per run, beside runs.jsonl;
* ``heatmap`` - The ledger's picture: the headline quantity, the swap effect, and what each
  framework does with a fault;
* ``html`` - ledger.html: one self-contained viewer beside LEDGER.md (no server, no network, no
  CDN);
* ``kinds`` - Which kind of model a ledger row is about, from the reference registry's entries;
* ``load`` - Reading a ledger folder (``meta.json`` + ``runs.jsonl``) into typed records and one
  flat polars frame;
* ``names`` - Classification names in the order the ledger shows them: derived from claimgrid.vocab;
* ``pages`` - Per-run pages: ``runs/<run id>/RUN.md``, the explanation of one run beside its
  evidence;
* ``paired`` - Framework differences on a stochastic model, tested as paired comparisons on the same
  cells;
* ``parity`` - Parity groups: which runs may be pooled into one aggregate;
* ``ratetable`` - The first screen of a ledger of stochastic runs (a real model's grid, or an audit
  of runs made elsewhere): one table per model of rates with their n and 95% interval, then the
  paired framework tests that have data, one line each, and one sentence for the rest;
* ``report`` - The computed tables of one ledger, which every page reads: LEDGER.md's sections
  (:mod:`claimgrid.ledger.sections`, one module per section), RUNS.md, the heatmap, the viewer and
  the terminal summary (:mod:`claimgrid.ledger.firstscreen`);
* ``rules`` - Why a run got its classification: for each field, the rule that fired and the evidence
  lines;
* ``sections`` - LEDGER.md and RUNS.md from one :class:`~claimgrid.ledger.report.Report` (the
  computed tables);
* ``stats`` - Rates with honest uncertainty: the Wilson score interval, a task-clustered interval
  and the ledger's rate format.
"""

from __future__ import annotations

from pathlib import Path

from claimgrid.anybytes import markdown_text, safe_text
from claimgrid.ledger.load import Ledger, load_ledger
from claimgrid.ledger.stats import format_rate, wilson
from claimgrid.store.inert import remove_file, write_file

__all__ = ["render_ledger", "headline_table", "terminal_summary", "wilson", "format_rate", "load"]

HEATMAP = "heatmap.svg"


def load(ledger_dir: Path, on_run=None) -> Ledger:
    """The ledger folder as a :class:`~claimgrid.ledger.load.Ledger` (flat polars frame + meta)."""
    return load_ledger(Path(ledger_dir), on_run)


def render_ledger(ledger_dir: Path, summary: list[str] | None = None) -> Path:
    """Write LEDGER.md, RUNS.md, ledger.html, heatmap.svg, runs.parquet and every ``runs/<id>/RUN.md``
    into ``ledger_dir``; return LEDGER.md's path. A pure function of the folder (records,
    evidence, ``meta.json``): rendering twice, or on another checkout, gives byte-identical
    files. ``summary``, when given, receives the end-of-grid summary's lines
    (:func:`terminal_summary`). A folder older than the facts it should carry says in LEDGER.md what it read
    from this checkout instead (:mod:`claimgrid.ledger.facts`)."""
    from claimgrid.ledger.columns import treatment
    from claimgrid.ledger.firstscreen import terminal_lines
    from claimgrid.ledger.frame import PARQUET_NAME, write_frame
    from claimgrid.ledger.heatmap import write_heatmap
    from claimgrid.ledger.html import ViewerPages, render_html
    from claimgrid.ledger.pages import read_stderr, write_run_md
    from claimgrid.ledger.report import Report
    from claimgrid.ledger.rules import explain, fault_account
    from claimgrid.ledger.sections import details_md, ledger_md, runs_md

    ledger_dir = Path(ledger_dir)
    pages = ViewerPages(ledger_dir)

    def on_run(rec, events, patch, digest):
        rules = explain(rec, events)  # once per run: RUN.md and ledger.html show the same rules
        fault = fault_account(rec, events, read_stderr(ledger_dir, rec)) if rec.faults and rec.faults.fault else None
        write_run_md(ledger_dir, rec, events, digest, rules, fault)
        pages.add(rec, events, patch, rules, fault)

    ledger = load(ledger_dir, on_run)
    report = Report(ledger, HEATMAP)
    heatmap_path = ledger_dir / HEATMAP
    # An older claimgrid drew the picture as heatmap.png: a re-render leaves no stale picture of
    # other code beside this one (derived files are never sealed: docs/CONTRACTS.md).
    remove_file(ledger_dir / "heatmap.png")
    if write_heatmap(report, heatmap_path) is None:
        report.heatmap_name = None
        remove_file(heatmap_path)
    write_frame(ledger, {r["run_id"]: r[treatment().name] for r in report.rows}, ledger_dir / PARQUET_NAME)
    out = ledger_dir / "LEDGER.md"
    # Write-then-rename: a reader (or a crash) never sees half a ledger.
    for name, text in (
        ("RUNS.md", runs_md(report)),
        ("ledger.html", render_html(report, pages)),
        ("DETAILS.md", details_md(report)),  # LEDGER.md's long sections, whole (sections.fold)
        ("LEDGER.md", ledger_md(report)),
    ):
        # Agent text may hold lone surrogates (kept losslessly in the evidence): a page
        # shows each as visible \udXXX text instead of failing to encode; a Markdown page also
        # shows control and bidi characters as escapes and any field's HTML as text. Each file
        # through a new temporary (claimgrid.store.inert): a symlink planted at the name is refused.
        write_file(ledger_dir / name, markdown_text(text) if name.endswith(".md") else safe_text(text))
    if summary is not None:  # the end-of-grid summary, from the same tables (no second load)
        summary += terminal_lines(report, ledger_dir)
    return out


def headline_table(ledger_dir: Path):
    """The headline (swap = none) as a rich Table: per model, utility and false success on clean content."""
    from rich.table import Table

    from claimgrid.ledger.report import Report

    report = Report(load(ledger_dir))
    rows = report.headline_rows()
    if not rows:
        return "No runs in this ledger yet."
    t = Table(title="Headline, swap = none (LEDGER.md section 2)", caption=report.coverage_line())
    split = len(report.groups) > 1
    for h in (
        *(["parity group"] if split else []),
        "model",
        "frameworks",
        "utility, clean",
        "false success among claims, clean",
        *[f"paired attack success, {c}" for c in report.injected],
    ):
        t.add_column(h)
    for h in rows:
        t.add_row(
            *([h["group"]] if split else []),
            h["model"],
            h["frameworks"],
            format_rate(h["utility_clean"][0], h["utility_clean"][1], report.interval(h["model"])),
            format_rate(h["fs_clean"][0], h["fs_clean"][1], report.interval(h["model"])),
            *[h["asr_text"][c] for c in report.injected],
        )
    return t


def terminal_summary(ledger_dir: Path) -> list[str]:
    """The end-of-grid summary (:func:`claimgrid.ledger.firstscreen.terminal_lines`)."""
    from claimgrid.ledger.firstscreen import terminal_lines
    from claimgrid.ledger.report import Report

    return terminal_lines(Report(load(ledger_dir)), Path(ledger_dir))
