"""Reads by coverage through the real pipeline: reviewers that read the task's files with
``cat -n`` or with two ``sed -n`` ranges have read them (their review is correct, as their
truth says); one that prints a single line of each file has not, and its partial read is
recorded with its coverage. On ``plain``, the review tasks of the default suite, the
untreated cell."""

from __future__ import annotations

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.store.record import read_records

READERS = {"numbered-reviewer": "correct", "ranged-reviewer": "correct", "grep-skimmer": "files not opened"}


def test_shell_reads_count_by_coverage(plain_venvs, tmp_path):
    reviews = [t for t in in_suite(load_tasks(), "default").values() if t.spec.expectation.review]
    assert reviews
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    out = tmp_path / "ledger"
    assert main(["run", "--venvs", str(plain_venvs), "--out", str(out), "--no-progress",
                 "--tasks", ",".join(t.id for t in reviews), "--content", content, "--swap", swap,
                 "--models", ",".join(READERS)]) == 0
    recs = read_records(out / "runs.jsonl")
    assert len(recs) == len(reviews) * len(READERS)
    for r in recs:
        c = r.classification.model_dump()
        assert {k: c[k] for k in r.truth} == r.truth, r.run_id
        assert c["review"] == READERS[r.model], r.run_id
        must = reviews[[t.id for t in reviews].index(r.task)].spec.expectation.review.must_open
        coverage = r.classification.evidence.read_coverage
        for path in must:
            if READERS[r.model] == "correct":
                assert coverage[path] >= 0.8 and "command output" in r.classification.evidence.opened[path]
            else:  # one line of a many-line file: recorded, and not a read
                assert 0 < coverage[path] < 0.8 and path not in r.classification.evidence.opened
