"""cap_strings cuts every string over the limit, wherever it sits in a JSON-like value, and
counts them; a value with nothing over is handed back as it is (not rebuilt)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from claimgrid.caps import cap_strings, cut_middle

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _rebuilt(v, limit):
    """Every string cut, the whole value rebuilt: what cap_strings did before its look-first."""
    if isinstance(v, str):
        new, was = cut_middle(v, limit)
        return new, int(was)
    if isinstance(v, dict):
        pairs = {k: _rebuilt(x, limit) for k, x in v.items()}
        return {k: p[0] for k, p in pairs.items()}, sum(p[1] for p in pairs.values())
    if isinstance(v, list):
        parts = [_rebuilt(x, limit) for x in v]
        return [p[0] for p in parts], sum(p[1] for p in parts)
    return v, 0


@given(JSON, st.integers(min_value=0, max_value=30))
def test_cut_as_a_full_rebuild_cuts(value, limit):
    got, cut = cap_strings(value, limit)
    want, want_cut = _rebuilt(value, limit)
    assert (got, cut) == (want, want_cut)
    if cut == 0:
        assert got is value
