"""bench/_figures.py: a bench script rewrites its own rows of bench/README.md's figures table,
stamped with the day and the machine, and leaves every other script's rows as they are."""

import importlib.util

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("_figures", ROOT / "bench" / "_figures.py")
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)

PAGE = """# bench
<!-- figures -->
| script | figure | value | recorded |
| --- | --- | --- | --- |
| `a.py` | speed | 1 s | 2026-01-01, old |
| `b.py` | size | 2 MB | 2026-01-01, old |
| `a.py` | memory | 3 MB | 2026-01-01, old |
<!-- /figures -->
after
"""


def test_a_script_replaces_its_rows_in_place_and_keeps_the_others():
    out = figures.rewrite(PAGE, "a.py", {"speed": "0.5 s", "cpu": "x | y"}, "2026-12-07, 2 cores")
    assert figures.rows(out) == [
        ["`a.py`", "speed", "0.5 s", "2026-12-07, 2 cores"],
        ["`a.py`", "cpu", "x \\| y", "2026-12-07, 2 cores"],
        ["`b.py`", "size", "2 MB", "2026-01-01, old"],
    ]
    assert out.startswith("# bench\n") and out.endswith("<!-- /figures -->\nafter\n")


def test_a_new_script_goes_last_and_an_empty_record_is_refused():
    out = figures.rewrite(PAGE, "c.py", {"n": "4"}, "today")
    assert figures.rows(out)[-1] == ["`c.py`", "n", "4", "today"]
    assert len(figures.rows(out)) == 4
    with pytest.raises(ValueError, match="no figures"):
        figures.rewrite(PAGE, "c.py", {}, "today")
    with pytest.raises(ValueError, match="no <!-- figures -->"):
        figures.rows("no table here")


def test_record_stamps_the_machine_and_writes_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAIMGRID_BENCH_NO_RECORD", raising=False)
    page = tmp_path / "README.md"
    page.write_text(PAGE)
    figures.record("b.py", {"size": "1 MB"}, readme=page)
    (row,) = [r for r in figures.rows(page.read_text()) if r[0] == "`b.py`"]
    assert row[2] == "1 MB" and f"{__import__('os').cpu_count()} cores" in row[3]


def test_the_project_page_has_the_table():
    rows = figures.rows((ROOT / "bench" / "README.md").read_text())
    assert rows and all(len(r) == 4 for r in rows)
    scripts = {r[0].strip("`") for r in rows}
    missing = [s for s in scripts if not (ROOT / "bench" / s).exists() and not (ROOT / s).exists()]
    assert missing == [], f"bench/README.md's figures name scripts that do not exist: {missing}"
