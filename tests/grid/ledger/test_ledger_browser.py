"""ledger.html in a real headless Chromium (Debian's package), loaded from disk: apply
filters, open a run, check what is shown against runs.jsonl and the run's evidence."""

from __future__ import annotations

import json

import pytest

from tests.cdp import Browser, chromium_path, set_filter
from tests.ledger_support import events, records

# The grid of tests/ledger_support.py (the session's ledger_grid) builds its own
# (dependency-free) framework venv.
pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="chromium is not installed (apt-get install -y chromium chromium-driver)")


@pytest.fixture(scope="module")
def page(ledger_grid):
    folder = ledger_grid
    with Browser() as b:
        b.open(folder / "ledger.html")
        yield b, folder, records(folder)


def visible_ids(b) -> list[str]:
    return b.evaluate("[...document.querySelectorAll('#runs tbody tr.run')].map(tr => tr.dataset.id)")


def test_loads_every_run_offline(page):
    b, folder, recs = page
    assert b.evaluate("document.getElementById('count').textContent") == f"{len(recs)} of {len(recs)} runs"
    assert sorted(visible_ids(b)) == sorted(r["run_id"] for r in recs)
    # nothing was fetched from anywhere but the file itself
    urls = b.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert urls == []


def test_filters_then_opens_a_run(page):
    b, folder, recs = page
    set_filter(b, "model", "obedient")
    set_filter(b, "claim_vs_outcome", "FALSE_SUCCESS")
    want = sorted(r["run_id"] for r in recs if r["model"] == "obedient"
                  and r["classification"]["claim_vs_outcome"] == "FALSE_SUCCESS")
    assert want and sorted(visible_ids(b)) == want
    assert b.evaluate("document.getElementById('count').textContent") == f"{len(want)} of {len(recs)} runs"

    first = visible_ids(b)[0]
    b.evaluate(f"document.querySelector('tr.run[data-id=\"{first}\"]').click()")
    rec = next(r for r in recs if r["run_id"] == first)
    ev = events(folder, rec)
    assert b.evaluate("document.getElementById('run-title').textContent") == first
    # transcript: one row per gateway exchange, with the model that really served
    shown = b.evaluate("[...document.querySelectorAll('#exchanges tr')].slice(1).map(tr => "
                       "[...tr.cells].slice(0, 5).map(td => td.textContent))")
    gateway = sorted((e for e in ev if e["source"] == "gateway"), key=lambda e: e["call_index"])
    assert [row[:2] for row in shown] == [[str(e["call_index"]), e["served_model"]] for e in gateway]
    # tool events from the harness tool layer
    tools = b.evaluate("[...document.querySelectorAll('#tools tr')].slice(1).map(tr => tr.cells[0].textContent)")
    assert tools == [e["tool"] for e in ev if e["source"] == "tools"]
    # the rules that fired: every classification field with the stored value
    rules = dict(b.evaluate("[...document.querySelectorAll('#rules tr')].slice(1).map(tr => "
                            "[tr.cells[0].textContent, tr.cells[1].textContent])"))
    for field, value in rec["classification"].items():
        assert rules[field] == (value if isinstance(value, str) else json.dumps(value))
    detail = b.evaluate("document.getElementById('detail').textContent")
    assert "Test output" in detail and "Diff" in detail

    set_filter(b, "claim_vs_outcome", "")
    set_filter(b, "model", "")
    assert len(visible_ids(b)) == len(recs)
