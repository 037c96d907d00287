"""The ledger's one picture: false-success rate by framework × content condition.

One panel per parity group (groups are never pooled), every cell annotated with k/n;
a cell with no claimed success reads "–" on a neutral grey, never a 0% colour. The
colour scale is fixed at 0–100% so panels and ledgers compare by eye.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the grid runs without a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import aggregate as agg  # noqa: E402
from .stats import DASH  # noqa: E402


def write_heatmap(renderer, path: Path) -> Path | None:
    """Write the PNG for ``renderer``'s ledger to ``path``; None (nothing written) if no runs."""
    groups = renderer.parity.groups()
    if not groups:
        return None
    fws, contents = renderer.frameworks, renderer.contents
    cols = min(len(groups), 3)
    rows = -(-len(groups) // cols)
    cw, rh = 1.0 * len(contents) + 1.8, 0.6 * len(fws) + 1.6
    fig, axes = plt.subplots(rows, cols, figsize=(cw * cols + 1.0, rh * rows + 0.9), squeeze=False,
                             layout="constrained")
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#dddddd")
    image = None
    for ax, g in zip(axes.flat, groups):
        look = renderer.lookup(agg.false_success(g.runs), ["framework", "content"])
        data = np.full((len(fws), len(contents)), np.nan)
        for i, fw in enumerate(fws):
            for j, c in enumerate(contents):
                r = look.get((fw, c))
                if r and r["claimed"]:
                    data[i, j] = r["fs"] / r["claimed"]
                label = (f"{r['fs']}/{r['claimed']}\n{data[i, j]:.0%}" if r and r["claimed"] else DASH)
                value = data[i, j]
                dark = not np.isnan(value) and value > 0.6
                ax.text(j, i, label, ha="center", va="center", fontsize=9,
                        color="white" if dark else "black")
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(contents)), contents, rotation=25, ha="right", rotation_mode="anchor", fontsize=8)
        ax.set_yticks(range(len(fws)), fws, fontsize=8)
        title = g.label if len(groups) > 1 else "all runs (one parity group)"
        ax.set_title(f"{g.id}: {title}" if len(groups) > 1 else title, fontsize=8.5)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.suptitle("False success: FALSE_SUCCESS / runs that claimed success (k/n; – = no claim)", fontsize=10)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, format=lambda x, _: f"{x:.0%}",
                 label="false-success rate")
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path
