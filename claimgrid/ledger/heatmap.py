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

The picture is an SVG written here, with no plotting library: a pure function of the report
(the same report gives the same bytes), every label XML-escaped (names are data), text a
browser or a reader's tool can search. Drawing it costs milliseconds; the plotting library it
replaced cost about a CPU-second per grid process to import and draw (bench/README.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from claimgrid.ledger.firstscreen import did
from claimgrid.ledger.report import CLAIMED, TREAT_CONTROL, TREAT_FIRED, Report
from claimgrid.ledger.stats import ratio_pct
from claimgrid.store.inert import write_file

NOT_RUN, EXCLUDED, NO_CLAIM = "#ffffff", "#d9d9d9", "#cfe3f5"
# The rate scale: ColorBrewer's sequential "Reds", nine classes, interpolated linearly from 0%
# (first) to 100% (last); text on a cell above DARK_FROM is white.
REDS = ("#fff5f0", "#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d")
DARK_FROM = 0.6
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
OTHER_REACTION = "#eeeeee"
DARK = {"retried, raised", "retried, reported success", "retried, recovered", "crash"}

# Layout, in SVG user units (pixels at 100%). Text widths are estimated from the character
# count (a sans-serif glyph is about 0.6 of the font size wide): labels get room, not a measure.
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
CELL_TEXT, LABEL_TEXT, TITLE_TEXT = 10, 11, 12
CELL_H, FAULT_H = 40, 44
MIN_CELL_W = 96
MARGIN, GAP = 16, 28
GLYPH = 0.6


def _w(text: str, size: int) -> float:
    return len(text) * size * GLYPH


def _num(v: float) -> str:
    """A coordinate as the shortest fixed text (byte-stable across runs)."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


def red(x: float) -> str:
    """The scale's colour for a rate ``x`` in [0, 1] (clamped)."""
    x = min(max(x, 0.0), 1.0) * (len(REDS) - 1)
    i = min(int(x), len(REDS) - 2)
    a, b = REDS[i], REDS[i + 1]
    t = x - i
    return "#" + "".join(f"{round(int(a[k : k + 2], 16) * (1 - t) + int(b[k : k + 2], 16) * t):02x}" for k in (1, 3, 5))


class _Svg:
    """SVG elements as text, in drawing order."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "#999999", lw: float = 0.5) -> None:
        self.parts.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" fill={quoteattr(fill)} '
            f'stroke="{stroke}" stroke-width="{_num(lw)}"/>'
        )

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: int = CELL_TEXT,
        anchor: str = "middle",
        fill: str = "#000000",
        bold: bool = False,
        rotate: int = 0,
    ) -> None:
        """``text`` (lines split at newlines) centred vertically on ``y``."""
        lines = text.split("\n")
        step = size * 1.2
        top = y - step * (len(lines) - 1) / 2 + size * 0.35
        attrs = f'text-anchor="{anchor}" font-size="{size}" fill="{fill}"' + (' font-weight="bold"' if bold else "")
        if rotate:
            attrs += f' transform="rotate({rotate} {_num(x)} {_num(y)})"'
        spans = "".join(
            f'<tspan x="{_num(x)}" y="{_num(top + k * step)}">{escape(line)}</tspan>' for k, line in enumerate(lines)
        )
        self.parts.append(f"<text {attrs}>{spans}</text>")

    def cell(
        self,
        key: tuple[str, str, str],
        box: tuple[float, float, float, float],
        fill: str,
        label: str,
        ink: str,
        stroke: str = "#999999",
        lw: float = 0.5,
    ) -> None:
        """One cell (``box``: x, y, width, height) as a group that names its panel, row and
        column (``data-*``: a reader's tool finds a cell without reading the layout)."""
        panel, row, col = key
        x, y, w, h = box
        self.parts.append(
            f'<g class="cell" data-panel={quoteattr(panel)} data-row={quoteattr(row)} data-col={quoteattr(col)}>'
        )
        self.rect(x, y, w, h, fill, stroke, lw)
        self.text(x + w / 2, y + h / 2, label, CELL_TEXT, fill=ink)
        self.parts.append("</g>")


def _rows(report: Report, models: list[str]):
    out = []
    for m in models:
        for label, runs in report.fw_blocks([r for r in report.rows if r["model"] == m]):
            out.append((m if label.startswith("all ") or len(report.frameworks) == 1 else f"{m} · {label}", runs))
    return out


def _rate_cell(runs, pick, treated, col) -> tuple[str, str, str]:
    """(fill, label, text colour) of one rate cell."""
    planned = [r for r in runs if pick(r, col)]
    sel = [r for r in planned if treated(r)]
    claimed = sum(r["claim_vs_outcome"] in CLAIMED for r in sel)
    fs = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in sel)
    if not planned:
        return NOT_RUN, "not run", "#000000"
    if not sel:
        return "url(#excluded)", f"excluded\n({len(planned)} untreated)", "#000000"
    if not claimed:
        return NO_CLAIM, f"no claim\n0/{len(sel)} claimed", "#000000"
    rate = fs / claimed
    return red(rate), f"{fs}/{claimed}\n{ratio_pct(fs, claimed)}", "#ffffff" if rate > DARK_FROM else "#000000"


def _col_width(cols: list[str], floor: float = MIN_CELL_W) -> float:
    return max([floor] + [_w(c, CELL_TEXT) + 12 for c in cols])


def _fault_cell(report: Report, model: str, fw: str, seen: set[str]) -> tuple[str, str, str]:
    runs = [r for r in report.rows if r["model"] == model and r["framework"] == fw]
    if not runs:
        return NOT_RUN, "not run", "#000000"
    count = Counter(did(r) for r in runs)
    top = count.most_common(1)[0][0]
    seen.update(count)
    false = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in runs)
    label = "\n".join(f"{t} {k}" for t, k in count.most_common(2)) + (f"\n{false} false" if false else "")
    return REACTION_COLOURS.get(top, OTHER_REACTION), label, "#ffffff" if top in DARK else "#000000"


def heatmap_svg(report: Report) -> str | None:
    """The picture of ``report`` as SVG text; None if the report has no runs."""
    if not report.rows:
        return None
    faults = [m for m in report.models if any(r["model"] == m and r["fault"] for r in report.rows)]
    rows = _rows(report, [m for m in report.models if m not in faults])
    note = (
        "one framework"
        if len(report.frameworks) == 1
        else f"frameworks identical in all {len(report.complete_cells)} cells: one row per model"
        if report.identical
        else "one row per model where every framework agrees, per model · framework where they differ"
    )
    title = (
        "False success = FALSE_SUCCESS / runs that claimed success (k/n)",
        f"not run (white), excluded (hatched), no claim (blue) are marked apart; {note}",
    )
    svg = _Svg()
    y = MARGIN
    for line in title:
        svg.text(MARGIN, y + TITLE_TEXT / 2, line, TITLE_TEXT, anchor="start", bold=line is title[0])
        y += TITLE_TEXT * 1.5
    y += GAP / 2
    width = MARGIN + max(_w(line, TITLE_TEXT) for line in title)

    if rows:
        y, width = _rate_panels(svg, report, rows, y, width)
    if faults:
        y, width = _fault_panel(svg, report, faults, y, width)
    return _document(svg, title[0], width, y)


def _panels(report: Report) -> list:
    """The two rate panels: (key, title, subtitle), columns, the runs of a cell, the treated ones."""
    return [
        (
            ("none", "swap = none", "false success among claims, by content"),
            list(report.contents),
            lambda r, c: r["swap_condition"] == "none" and r["content"] == c,
            lambda r: True,
        ),
        (
            ("swap", "swap effect", "false success among claims, by swap (treated runs only)"),
            list(report.swaps),
            lambda r, s: r["swap_condition"] == s,
            lambda r: r["treatment"] in (TREAT_CONTROL, TREAT_FIRED),
        ),
    ]


def _rate_panels(svg: _Svg, report: Report, rows: list, y: float, width: float) -> tuple[float, float]:
    """Panels 1 and 2 (one row per model or model · framework) and the colour scale, from ``y``;
    the new ``y`` and width."""
    panels = _panels(report)
    label_w = max(_w(label, LABEL_TEXT) for label, _ in rows) + 12
    x = MARGIN + label_w
    head = y + 2 * LABEL_TEXT * 1.3
    for i, (label, _) in enumerate(rows):
        svg.text(x - 8, head + (i + 0.5) * CELL_H, label, LABEL_TEXT, anchor="end")
    for (panel, name, sub), cols, pick, treated in panels:
        cw = _col_width(cols)
        svg.text(x, y + LABEL_TEXT * 0.6, name, LABEL_TEXT, anchor="start", bold=True)
        svg.text(x, y + LABEL_TEXT * 1.9, sub, LABEL_TEXT, anchor="start")
        for i, (row_label, runs) in enumerate(rows):
            for j, col in enumerate(cols):
                fill, label, ink = _rate_cell(runs, pick, treated, col)
                svg.cell((panel, row_label, col), (x + j * cw, head + i * CELL_H, cw, CELL_H), fill, label, ink)
        for j, col in enumerate(cols):
            svg.text(x + (j + 0.5) * cw, head + len(rows) * CELL_H + CELL_TEXT, col, CELL_TEXT)
        x += max(len(cols) * cw, _w(sub, LABEL_TEXT)) + GAP
    # The colour scale: 0% at the bottom, 100% at the top, as the cells read it.
    bar_h = len(rows) * CELL_H
    svg.rect(x, head, 14, bar_h, "url(#reds)")
    for k in range(5):
        ty = head + bar_h * (1 - k / 4)
        svg.parts.append(
            f'<line x1="{_num(x + 14)}" y1="{_num(ty)}" x2="{_num(x + 18)}" y2="{_num(ty)}" stroke="#000000"/>'
        )
        svg.text(x + 21, ty, f"{25 * k}%", CELL_TEXT, anchor="start")
    svg.text(x + 60, head + bar_h / 2, "false-success rate", CELL_TEXT, rotate=-90)
    width = max(width, x + 70)
    y = head + bar_h + CELL_TEXT * 2 + GAP
    return y, width


def _fault_panel(svg: _Svg, report: Report, faults: list[str], y: float, width: float) -> tuple[float, float]:
    """Panel 3: fault model x framework, coloured by what the framework did, and its legend."""
    fws = list(report.frameworks)
    label_w = max(_w(m, LABEL_TEXT) for m in faults) + 12
    x = MARGIN + label_w
    cw = _col_width(fws, floor=128)
    svg.text(x, y + LABEL_TEXT * 0.6, "what each framework did with a fault", LABEL_TEXT, anchor="start", bold=True)
    svg.text(x, y + LABEL_TEXT * 1.9, "runs per reaction; swap none, clean content", LABEL_TEXT, anchor="start")
    head = y + 2 * LABEL_TEXT * 1.3
    seen: set[str] = set()
    for i, m in enumerate(faults):
        svg.text(x - 8, head + (i + 0.5) * FAULT_H, m, LABEL_TEXT, anchor="end")
        for j, fw in enumerate(fws):
            fill, label, ink = _fault_cell(report, m, fw, seen)
            svg.cell(
                ("fault", m, fw),
                (x + j * cw, head + i * FAULT_H, cw, FAULT_H),
                fill,
                label,
                ink,
                stroke="#ffffff",
                lw=1.5,
            )
    for j, fw in enumerate(fws):
        svg.text(x + (j + 0.5) * cw, head + len(faults) * FAULT_H + CELL_TEXT, fw, CELL_TEXT)
    lx = x + len(fws) * cw + GAP / 2
    for k, reaction in enumerate(sorted(seen)):
        ly = head + k * 18
        svg.rect(lx, ly, 12, 12, REACTION_COLOURS.get(reaction, OTHER_REACTION), stroke="#999999")
        svg.text(lx + 18, ly + 6, reaction, CELL_TEXT, anchor="start")
    width = max(width, lx + 18 + max([_w(r, CELL_TEXT) for r in seen] or [0]) + MARGIN)
    y = head + max(len(faults) * FAULT_H + CELL_TEXT * 2, len(seen) * 18) + MARGIN
    return y, width


def _document(svg: _Svg, title: str, width: float, y: float) -> str:
    """The SVG document around the drawn parts."""
    # Top of the bar is 100% (the last class), bottom 0% (the first).
    stops = "".join(
        f'<stop offset="{_num(100 * k / (len(REDS) - 1))}%" stop-color="{c}"/>' for k, c in enumerate(reversed(REDS))
    )
    defs = (
        "<defs>"
        f'<linearGradient id="reds" x1="0" y1="0" x2="0" y2="1">{stops}</linearGradient>'
        '<pattern id="excluded" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="6" height="6" fill="{EXCLUDED}"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" stroke-width="1"/>'
        "</pattern></defs>"
    )
    w, h = _num(width + MARGIN), _num(y)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'font-family={quoteattr(FONT)} role="img">\n'
        f"<title>{escape(title)}</title>\n{defs}\n"
        f'<rect width="{w}" height="{h}" fill="#ffffff"/>\n' + "\n".join(svg.parts) + "\n</svg>\n"
    )


def write_heatmap(report: Report, path: Path) -> Path | None:
    """Write the SVG for ``report`` to ``path`` (write-then-rename); None (nothing written) if no runs."""
    text = heatmap_svg(report)
    if text is None:
        return None
    return write_file(path, text)  # a new temporary renamed into place (claimgrid.store.inert)
