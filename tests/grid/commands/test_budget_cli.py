"""Budget flags through grid.py with reference models on the dependency-free ``plain``
framework: the token limit (reference token counts are estimates, counted all the same),
the note for models without a price, and bad limits rejected in one line."""

from __future__ import annotations

from tests.real_models_support import control_conditions, grid, meta, plain_venvs, records, two_models


def _cells(tasks):
    content, swap = control_conditions()
    return ["--tasks", next(iter(tasks)), "--content", content, "--swap", swap, "--models", ",".join(two_models())]


def test_token_limit_stops_and_unpriced_models_are_named(tmp_path, tasks):
    venvs = plain_venvs(tmp_path)
    out = tmp_path / "grid"
    p = grid(
        "run",
        "--venvs",
        str(venvs),
        "--out",
        str(out),
        "--no-progress",
        "--jobs",
        "1",
        "--max-tokens",
        "1",
        "--max-cost",
        "100",
        *_cells(tasks),
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    # Reference models have no price: said before the grid starts, and in the spend figures.
    assert "note: no known price for" in p.stdout and "count tokens only" in p.stdout
    stop = meta(out)["stopped_at_budget"]
    assert stop["limit"] == "max_tokens" and stop["tokens"] >= 1 and stop["cost_complete"] is False
    assert set(stop["unpriced_models"]) <= set(two_models()) and stop["unpriced_models"]
    assert len(records(out)) == 1 and stop["runs_not_started"] == 1
    assert "cost unknown (unpriced)" in p.stdout  # the progress line does not invent a $0

    p = grid("run", "--resume", str(out), "--venvs", str(venvs), "--no-progress", "--max-tokens", "10000000")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(records(out)) == 2 and meta(out)["stopped_at_budget"] is None
    assert meta(out)["spend"]["tokens"] > stop["tokens"]


def test_bad_limits_are_one_line_and_write_nothing(tmp_path, tasks):
    venvs = plain_venvs(tmp_path)
    for flag, value in (
        ("--max-cost", "-1"),
        ("--max-tokens", "0"),
        ("--provider-retries", "-2"),
        ("--provider-backoff", "-0.5"),
        ("--provider-timeout", "0"),
    ):
        out = tmp_path / f"x{flag}"
        p = grid("run", "--venvs", str(venvs), "--out", str(out), flag, value, *_cells(tasks))
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and flag in lines[0], p.stderr
        assert not out.exists()
