"""claimgrid.anybytes.md_table is the one markdown-table writer: a cell holds any text as text (no column
split by ``|``, no HTML read from ``<``), code spans kept literal; the modules that write a
table go through it (replay's summary was the one that left ``|`` unescaped)."""

from __future__ import annotations

import pytest

from claimgrid.anybytes import md_cell as cell
from claimgrid.anybytes import md_table as table
from claimgrid.commands import replay


def _columns(line: str) -> int:
    """The cells GitHub's table parser splits a row into (an escaped pipe splits nothing)."""
    return len(line.strip().strip("|").replace("\\|", "").split("|"))


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a|b", "a\\|b"),
        ("ledger/<grid id>", "ledger/&lt;grid id>"),
        ("<script>alert(1)</script>", "&lt;script>alert(1)&lt;/script>"),
        ("&lt;b&gt; & co", "&amp;lt;b&amp;gt; & co"),
        ("`<k>` and <k>", "`<k>` and &lt;k>"),
        ("p <0.001, a -> b", "p <0.001, a -> b"),
        ("`a|b`", "`a\\|b`"),
        ("two\nlines\t tabbed", "two lines tabbed"),
        (None, "None"),
    ],
)
def test_a_cell_holds_any_text_as_text(text, shown):
    assert cell(text) == shown


def test_a_table_has_one_column_per_header_whatever_the_cells_hold():
    md = table(["field", "A|B"], [["x|y", "<td>z</td>"], ["`p|q`", 3]])
    lines = md.splitlines()
    assert lines[1] == "|---|---|"
    assert [_columns(line) for line in lines] == [2, 2, 2, 2]
    assert "<td>" not in md


def test_replay_summary_escapes_its_cells():
    summary = {
        "source": "ledger/x",
        "runs": 1,
        "requests_identical": 0,
        "classifications_identical": 0,
        "framework_version_changes": {},
        "task_changes": [],
        "runs_detail": [
            {
                "run_id": "r|1",
                "requests": {"match": False, "replayed_calls": 1, "recorded_calls": 2, "first_diff": "call 2: a|b <x>"},
                "classification_match": False,
                "classification_diff": {"outcome": ["PASS", "FAIL"]},
            }
        ],
    }
    rows = [line for line in replay._markdown(summary).splitlines() if line.startswith("| r\\|1")]
    assert len(rows) == 1 and _columns(rows[0]) == 4
    assert "&lt;x>" in rows[0]
