"""claimgrid.anybytes: any text encodes, JSON round-trips losslessly, bytes that were
decoded with surrogateescape come back as the same bytes (Hypothesis; profile in tests/conftest.py)."""

from __future__ import annotations

import json
import os

from hypothesis import given
from hypothesis import strategies as st

from claimgrid.anybytes import json_text, safe_text, substitutions, utf8

# Any code point, lone surrogates included (st.text() excludes them by default).
ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(JSONISH)
def test_json_text_always_encodes_and_round_trips(value):
    text = json_text(value)
    text.encode("utf-8")  # never raises
    assert json.loads(text) == value


@given(ANY_TEXT)
def test_utf8_never_raises_and_substitutes_visibly(text):
    data = utf8(text)
    assert isinstance(data, bytes)
    if substitutions(text) == 0:
        # only valid text and escape surrogates: lossless
        assert data.decode("utf-8", errors="surrogateescape") == text
    else:
        assert b"\\ud" in data or b"\\ud" in data.lower()
    safe_text(text).encode("utf-8")


@given(st.binary())
def test_bytes_decoded_with_surrogateescape_come_back_whole(raw):
    assert utf8(raw.decode("utf-8", errors="surrogateescape")) == raw


def test_a_lone_surrogate_is_counted_and_shown():
    assert substitutions("a\ud800b\udcffc") == 1  # \udcff is a byte, \ud800 is not
    assert utf8("a\ud800b\udcffc") == b"a\\ud800b\xffc"
    assert json_text({"t": "\ud800"}) == '{"t": "\\ud800"}'


def test_remove_tree_empties_locked_folders_and_never_follows_a_link(tmp_path):
    from claimgrid.anybytes import remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    root = tmp_path / "tree"
    for sub in ("a/b/c", "a/d", "e", ".git/objects/pack", ".git/refs/heads"):
        (root / sub).mkdir(parents=True)
        (root / sub / "f").write_text("x")
    os.symlink(outside, root / "a" / "out")  # a link to a folder: removed as a link
    os.symlink(outside / "keep", root / "e" / "out-file")
    os.chmod(root / "a" / "d", 0o500)  # not writable: made ours before emptying
    os.chmod(root / "a" / "b", 0o000)  # not even traversable
    assert remove_tree(root) and not os.path.lexists(root)
    assert (outside / "keep").read_text() == "kept"
    assert remove_tree(root)  # already gone: True


def test_markdown_text_shows_html_controls_and_bidi_as_text_and_keeps_anchors():
    from claimgrid.anybytes import markdown_text

    page = '<a id="x"></a>\n## T <script>x</script> <!-- c --> <1% \x1b[31m \u202e \x00 \ud800\tok'
    out = markdown_text(page)
    assert out == '<a id="x"></a>\n## T &lt;script>x&lt;/script> &lt;!-- c --> <1% \\x1b[31m \\u202e \\x00 \\ud800\tok'
