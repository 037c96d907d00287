"""The ledger picture's SVG primitives: any label is data (escaped, read back whole), and the
rate scale runs from its first to its last colour, darker as the rate grows."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from claimgrid.ledger.heatmap import REDS, _Svg, red

SVG = "{http://www.w3.org/2000/svg}"
# Text XML 1.0 can carry: a label is a name or a count, never a control character, but any
# printable text (quotes, angle brackets, ampersands, non-ASCII) must survive.
LABEL = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)


@given(lines=st.lists(LABEL, min_size=1, max_size=3), key=st.tuples(LABEL, LABEL, LABEL))
def test_a_cell_reads_back_exactly_what_it_was_given(lines, key):
    svg = _Svg()
    svg.cell(key, (0, 0, 10, 10), "#ffffff", "\n".join(lines), "#000000")
    root = ET.fromstring(f'<svg xmlns="http://www.w3.org/2000/svg">{"".join(svg.parts)}</svg>')
    (g,) = root.iter(SVG + "g")
    assert (g.get("data-panel"), g.get("data-row"), g.get("data-col")) == key
    assert [t.text or "" for t in g.iter(SVG + "tspan")] == "\n".join(lines).split("\n")


def test_the_scale_is_fixed_and_darkens_with_the_rate():
    assert red(0.0) == REDS[0] and red(1.0) == REDS[-1] and red(0.5) == REDS[len(REDS) // 2]
    assert red(-1.0) == REDS[0] and red(2.0) == REDS[-1]  # clamped, never outside the scale
    lightness = [sum(int(red(k / 20)[i : i + 2], 16) for i in (1, 3, 5)) for k in range(21)]
    assert lightness == sorted(lightness, reverse=True) and lightness[0] > lightness[-1]
