"""The progress line without a terminal: runs done, rate, time left and false successes so far."""

from __future__ import annotations

from collections import Counter

from claimgrid.execute.engine import _Progress, eta


def test_eta_reads_as_time_left():
    assert eta(90, 1.0) == "1m30s" and eta(3, 2.0) == "2s" and eta(7300, 2.0) == "1h00m" and eta(0, 5.0) == "0s"


def test_plain_progress_line_counts_runs_and_false_successes(capsys):
    p = _Progress(2, enabled=False)
    p.advance(Counter(PASS=1), 0)
    p.advance(Counter(PASS=1, TESTS_FAIL=1), 1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("[2/2 runs] ") and "ETA 0s" in lines[-1] and "false success 1" in lines[-1]
    assert all(len(line) <= 80 for line in lines)
