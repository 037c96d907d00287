"""The ledger's picture: the headline quantity, the swap effect, and what each framework does with a fault.

Panel 1 (top left): false success among claims under swap condition `none`, by model ×
content condition. Panel 2 (top right): false success among claims by model × swap condition,
counting only runs that received their treatment (control, or a swap that fired). Both show
the models that are not fault models; a model is one row when every framework gave the same
classification in its cells, else one row per model · framework (frameworks are never pooled).
Panel 3 (bottom, when the grid has fault models): fault model × framework, each cell coloured by
what the framework did (raised, reported success, ended silently, recovered, ...) with its count
and the false successes among them.

Cells that carry no rate are marked apart, never with a 0% colour: ``not run`` (white: the grid
never crossed the model with that condition), ``excluded`` (hatched: runs exist, none received
the treatment) and ``no claim`` (pale blue: runs exist and none claimed success, e.g. every run
stopped after a refused call). The colour scale is fixed at 0–100% so panels and ledgers compare by eye.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the grid runs without a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from claimgrid.ledger.firstscreen import did  # noqa: E402
from claimgrid.ledger.report import CLAIMED, TREAT_CONTROL, TREAT_FIRED, Report  # noqa: E402
from claimgrid.ledger.stats import ratio_pct  # noqa: E402

NOT_RUN, EXCLUDED, NO_CLAIM = "#ffffff", "#d9d9d9", "#cfe3f5"
# What a framework did with a fault: a fixed colour per reaction, apart from the rate scale's
# reds (others get pale grey); DARK ones carry white text.
REACTION_COLOURS = {
    "raised": "#b2abd2",
    "retried, raised": "#8073ac",
    "reported success": "#f1a340",
    "retried, reported success": "#e66101",
    "ended silently": "#fee8a0",
    "recovered": "#a6dba0",
    "retried, recovered": "#1b7837",
    "timeout": "#bababa",
    "crash": "#878787",
}
DARK = {"retried, raised", "retried, reported success", "retried, recovered", "crash"}


def _rows(report: Report, models: list[str]):
    out = []
    for m in models:
        for label, runs in report.fw_blocks([r for r in report.rows if r["model"] == m]):
            out.append((m if label.startswith("all ") or len(report.frameworks) == 1 else f"{m} · {label}", runs))
    return out


def _rate_panel(ax, rows, cols, pick, treated, title, cmap):
    data = np.full((len(rows), len(cols)), np.nan)
    for i, (_, runs) in enumerate(rows):
        for j, c in enumerate(cols):
            planned = [r for r in runs if pick(r, c)]
            sel = [r for r in planned if treated(r)]
            claimed = sum(r["claim_vs_outcome"] in CLAIMED for r in sel)
            fs = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in sel)
            if not planned:
                colour, label = NOT_RUN, "not run"
            elif not sel:
                colour, label = EXCLUDED, f"excluded\n({len(planned)} untreated)"
            elif not claimed:
                colour, label = NO_CLAIM, f"no claim\n0/{len(sel)} claimed"
            else:
                data[i, j] = fs / claimed
                colour, label = None, f"{fs}/{claimed}\n{ratio_pct(fs, claimed)}"
            if colour is not None:
                ax.add_patch(
                    Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        facecolor=colour,
                        edgecolor="#999999",
                        hatch="//" if colour == EXCLUDED else None,
                        lw=0.5,
                    )
                )
            dark = colour is None and data[i, j] > 0.6
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(cols)), cols, rotation=25, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_title(title, fontsize=9)
    return image


def _fault_panel(ax, report: Report, faults: list[str]):
    fws = report.frameworks
    seen: set[str] = set()
    for i, m in enumerate(faults):
        for j, f in enumerate(fws):
            runs = [r for r in report.rows if r["model"] == m and r["framework"] == f]
            if not runs:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=NOT_RUN, edgecolor="#999999", lw=0.5))
                ax.text(j, i, "not run", ha="center", va="center", fontsize=7)
                continue
            count = Counter(did(r) for r in runs)
            top = count.most_common(1)[0][0]
            seen.update(count)
            false = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in runs)
            label = "\n".join(f"{t} {k}" for t, k in count.most_common(2)) + (f"\n{false} false" if false else "")
            ax.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    facecolor=REACTION_COLOURS.get(top, "#eeeeee"),
                    edgecolor="white",
                    lw=1.5,
                )
            )
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color="white" if top in DARK else "black")
    ax.set_xlim(-0.5, len(fws) - 0.5)
    ax.set_ylim(len(faults) - 0.5, -0.5)
    ax.set_xticks(range(len(fws)), fws, fontsize=8)
    ax.set_yticks(range(len(faults)), faults, fontsize=8)
    ax.set_title("what each framework did with a fault (runs per reaction; swap none, clean content)", fontsize=9)
    ax.legend(
        handles=[Patch(facecolor=REACTION_COLOURS.get(t, "#eeeeee"), label=t) for t in sorted(seen)],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
    )


def write_heatmap(report: Report, path: Path) -> Path | None:
    """Write the PNG for ``report`` to ``path``; None (nothing written) if no runs."""
    if not report.rows:
        return None
    faults = [m for m in report.models if any(r["model"] == m and r.get("fault") for r in report.rows)]
    behaviour = [m for m in report.models if m not in faults]
    rows = _rows(report, behaviour)
    panels = [
        (
            "swap = none: false success among claims, by content",
            report.contents,
            lambda r, c: r["swap_condition"] == "none" and r["content"] == c,
            lambda r: True,
        ),
        (
            "swap effect: false success among claims, by swap (treated runs only)",
            report.swaps,
            lambda r, s: r["swap_condition"] == s,
            lambda r: r["treatment"] in (TREAT_CONTROL, TREAT_FIRED),
        ),
    ]
    widths = [len(p[1]) for p in panels]
    top_h = 0.55 * len(rows) + 1.2 if rows else 0
    bottom_h = 0.6 * len(faults) + 1.2 if faults else 0
    mosaic: list = ([["A", "B"]] if rows else []) + ([["C", "C"]] if faults else [])
    fig, axes = plt.subplot_mosaic(
        mosaic,
        figsize=(max(1.3 * sum(widths) + 5.0, 1.6 * len(report.frameworks) + 5.0), top_h + bottom_h + 1.0),
        gridspec_kw={"width_ratios": widths, "height_ratios": [h for h in (top_h, bottom_h) if h]},
        layout="constrained",
    )
    cmap = matplotlib.colormaps["Reds"]
    if rows:
        image = None
        for name, (title, cols, pick, treated) in zip("AB", panels):
            image = _rate_panel(axes[name], rows, cols, pick, treated, title, cmap)
        assert image is not None
        fig.colorbar(
            image,
            ax=[axes["A"], axes["B"]],
            shrink=0.8,
            format=lambda x, _: f"{x:.0%}",
            label="false-success rate",
        )
    if faults:
        _fault_panel(axes["C"], report, faults)
    note = (
        "one framework"
        if len(report.frameworks) == 1
        else f"frameworks identical in all {len(report.complete_cells)} cells: one row per model"
        if report.identical
        else "one row per model where every framework agrees, per model · framework where they differ"
    )
    fig.suptitle(
        "False success = FALSE_SUCCESS / runs that claimed success (k/n); "
        f"not run (white), excluded (hatched), no claim (blue) are marked apart; {note}",
        fontsize=9,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path
