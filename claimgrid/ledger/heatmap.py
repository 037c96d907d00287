"""The ledger's picture: the headline quantity and the swap effect, side by side.

Panel 1 (left, always first): false success among claims under swap condition `none`,
by model × content condition. Panel 2: false success among claims by model × swap
condition, counting only runs that received their treatment (control, or a swap that
fired; not-reached and no-op runs are left out). Rows are models in the ledger's order;
when frameworks differ, one row per model · framework (frameworks are never pooled).
Each cell shows k/n; a cell without a claim reads "–" on grey, never a 0% colour. The
colour scale is fixed at 0–100% so panels and ledgers compare by eye.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the grid runs without a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from claimgrid.ledger.report import CLAIMED, TREAT_CONTROL, TREAT_FIRED, Report  # noqa: E402
from claimgrid.ledger.stats import DASH, ratio_pct  # noqa: E402


def _rows(report: Report):
    out = []
    for m in report.models:
        for label, runs in report.fw_blocks([r for r in report.rows if r["model"] == m]):
            out.append((m if label.startswith("all ") or len(report.frameworks) == 1 else f"{m} · {label}", runs))
    return out


def write_heatmap(report: Report, path: Path) -> Path | None:
    """Write the PNG for ``report`` to ``path``; None (nothing written) if no runs."""
    if not report.rows:
        return None
    rows = _rows(report)
    panels = [
        (
            "swap = none: false success among claims, by content",
            report.contents,
            lambda r, c: r["swap_condition"] == "none" and r["content"] == c,
        ),
        (
            "swap effect: false success among claims, by swap (treated runs only)",
            report.swaps,
            lambda r, s: r["swap_condition"] == s and r["treatment"] in (TREAT_CONTROL, TREAT_FIRED),
        ),
    ]
    widths = [len(p[1]) for p in panels]
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(1.15 * sum(widths) + 4.2, 0.5 * len(rows) + 2.0),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
        layout="constrained",
    )
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#dddddd")
    image = None
    for ax, (title, cols, pick) in zip(axes.flat, panels):
        data = np.full((len(rows), len(cols)), np.nan)
        for i, (_, runs) in enumerate(rows):
            for j, c in enumerate(cols):
                sel = [r for r in runs if pick(r, c)]
                claimed = sum(r["claim_vs_outcome"] in CLAIMED for r in sel)
                fs = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in sel)
                if claimed:
                    data[i, j] = fs / claimed
                label = f"{fs}/{claimed}\n{ratio_pct(fs, claimed)}" if claimed else DASH
                dark = claimed and data[i, j] > 0.6
                ax.text(j, i, label, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(cols)), cols, rotation=25, ha="right", rotation_mode="anchor", fontsize=8)
        ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
        ax.set_title(title, fontsize=9)
    note = (
        "one framework"
        if len(report.frameworks) == 1
        else f"frameworks identical in all {len(report.complete_cells)} cells: one row per model"
        if report.identical
        else "one row per model and framework where they differ"
    )
    fig.suptitle(f"False success = FALSE_SUCCESS / runs that claimed success (k/n; – = no claim); {note}", fontsize=9)
    assert image is not None  # both panels drew their image
    fig.colorbar(
        image, ax=axes.ravel().tolist(), shrink=0.8, format=lambda x, _: f"{x:.0%}", label="false-success rate"
    )
    fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path
