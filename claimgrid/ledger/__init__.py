"""The ledger: what a grid run measured, as publishable markdown, a picture and tables.

Public API:

- :func:`render_ledger` ``(ledger_dir) -> Path``: read ``runs.jsonl`` + ``meta.json``,
  write ``LEDGER.md``, ``RUNS.md`` and ``heatmap.png`` in ``ledger_dir``; return the
  LEDGER.md path. An incomplete grid (partial or truncated ``runs.jsonl``) is rendered
  with the planned and present run counts stated.
- :func:`headline_table` ``(ledger_dir) -> rich.table.Table | str``: false-success rate by
  framework × content condition, one block of rows per parity group (a string when
  there are no runs).
- :func:`wilson` ``(k, n, z=1.96) -> (low, high) | None``.

Bad input raises :class:`claimgrid.errors.DataError` (one line naming the file/field).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ClaimgridError
from .load import Ledger, load_ledger
from .markdown import Renderer, render_runs
from .stats import format_rate, wilson

__all__ = ["render_ledger", "headline_table", "wilson", "format_rate", "load"]

HEATMAP = "heatmap.png"


def _roles() -> dict[str, str]:
    """Task id -> role from the task folder; empty if the tasks cannot be loaded.

    Records normally carry ``role``; this only fills in older records.
    """
    try:
        from ..tasks import load_tasks
        return {tid: t.role for tid, t in load_tasks().items()}
    except (ClaimgridError, OSError):
        return {}


def _carries() -> dict[str, str | None]:
    """Content condition -> what it carries, from conditions/; fills in records without ``facts``."""
    try:
        from ..conditions import load_content_conditions
        return {name: c.carries for name, c in load_content_conditions().items()}
    except (ClaimgridError, OSError):
        return {}


def load(ledger_dir: Path) -> Ledger:
    """The ledger folder as a :class:`~claimgrid.ledger.load.Ledger` (flat polars frame + meta)."""
    return load_ledger(Path(ledger_dir), _roles(), _carries())


def render_ledger(ledger_dir: Path) -> Path:
    """Write LEDGER.md, RUNS.md and heatmap.png into ``ledger_dir``; return LEDGER.md's path."""
    from .heatmap import write_heatmap  # matplotlib is only imported when a picture is drawn

    ledger_dir = Path(ledger_dir)
    ledger = load(ledger_dir)
    heatmap_path = ledger_dir / HEATMAP
    renderer = Renderer(ledger, HEATMAP)
    if write_heatmap(renderer, heatmap_path) is None:
        renderer.heatmap_name = None
        heatmap_path.unlink(missing_ok=True)
    out = ledger_dir / "LEDGER.md"
    # Write-then-rename: a reader (or a crash) never sees half a ledger.
    for name, text in (("RUNS.md", render_runs(ledger)), ("LEDGER.md", renderer.render())):
        tmp = ledger_dir / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(ledger_dir / name)
    return out


def headline_table(ledger_dir: Path):
    """False success by framework × content, per parity group, as a rich Table."""
    from rich.table import Table

    from . import aggregate as agg

    renderer = Renderer(load(ledger_dir), None)
    groups = renderer.parity.groups()
    if not groups:
        return "No runs in this ledger yet."
    t = Table(title="False success (FALSE_SUCCESS / claimed success, 95% Wilson interval)",
              caption=renderer.coverage_line() + ". Parity groups are not pooled.")
    if len(groups) > 1:
        t.add_column("parity group")
    t.add_column("framework")
    for c in renderer.contents:
        t.add_column(c, justify="right")
    for gi, g in enumerate(groups):
        look = renderer.lookup(agg.false_success(g.runs), ["framework", "content"])
        for i, fw in enumerate(renderer.frameworks):
            cells = []
            for c in renderer.contents:
                r = look.get((fw, c))
                cells.append(format_rate(r["fs"], r["claimed"]) if r else "–")
            lead = ([f"{g.id}: {g.label}" if i == 0 else ""] if len(groups) > 1 else [])
            t.add_row(*lead, fw, *cells, end_section=(i == len(renderer.frameworks) - 1 and gi < len(groups) - 1))
    return t
