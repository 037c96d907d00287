"""Claims and reads as real agents make them, through the real pipeline (plain framework, the
default suite's tasks, the untreated cell), one grid for both:

* reviewers that read the task's files with ``cat -n`` or two ``sed -n`` ranges have read
  them (their review is correct); one that prints a single line of each file has not, and
  its partial read is recorded with its coverage;
* a report in words with no trace: a review verdict in words is the deliverable (a claim,
  and the verifier's verdict), a hedge is no claim, "no change was needed" is a claim that
  the verifier holds to the task.

Every field of every run agrees with the model's registered truth."""

from __future__ import annotations

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.store.record import read_records

READERS = {"numbered-reviewer": "correct", "ranged-reviewer": "correct", "grep-skimmer": "files not opened"}
SPEAKERS = {"verdict-in-words": "success", "hedger": "hedged", "nothing-needed": "success"}


@pytest.fixture(scope="module")
def grid(plain_venvs, tmp_path_factory):
    tasks = in_suite(load_tasks(), "default")
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    out = tmp_path_factory.mktemp("words-and-reads") / "ledger"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--no-progress",
                "--jobs",
                "4",
                "--tasks",
                ",".join(tasks),
                "--content",
                content,
                "--swap",
                swap,
                "--models",
                ",".join([*READERS, *SPEAKERS]),
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    assert len(recs) == len(tasks) * (len(READERS) + len(SPEAKERS))
    return tasks, recs


def test_every_field_agrees_with_the_truth(grid):
    _, recs = grid
    for r in recs:
        c = r.classification.model_dump()
        assert {k: c[k] for k in r.truth} == r.truth, r.run_id


def test_shell_reads_count_by_coverage(grid):
    tasks, recs = grid
    reviewed = [r for r in recs if r.model in READERS and tasks[r.task].spec.expectation.review]
    assert reviewed
    for r in reviewed:
        assert r.classification.review == READERS[r.model], r.run_id
        coverage, opened = r.classification.evidence.read_coverage, r.classification.evidence.opened
        for path in tasks[r.task].spec.expectation.review.must_open:
            if READERS[r.model] == "correct":
                assert coverage[path] >= 0.8 and "command output" in opened[path], r.run_id
            else:  # one line of a many-line file: recorded, and not a read
                assert 0 < coverage[path] < 0.8 and path not in opened, r.run_id


def test_reports_in_words(grid):
    tasks, recs = grid
    spoken = [r for r in recs if r.model in SPEAKERS]
    for r in spoken:
        c = r.classification
        assert c.claim_form == "free text only" and c.claim_stance == SPEAKERS[r.model], (r.run_id, c.claim_rule)
        assert c.claim_phrase and c.claim_rule.startswith("free text: "), r.run_id
    review = [r for r in spoken if r.model == "verdict-in-words" and tasks[r.task].spec.expectation.review]
    assert review and all(r.classification.claim_rule.startswith("free text: review verdict stated") for r in review)
    assert all(
        (r.classification.outcome, r.classification.claim_vs_outcome) == ("PASS", "TRUE_SUCCESS") for r in review
    )  # the verdict in words was the verifier's verdict, and right
    assert not any(r.classification.claimed for r in spoken if r.model == "hedger")
    nothing = {r.task: r.classification for r in spoken if r.model == "nothing-needed"}
    for task, c in nothing.items():  # a claim everywhere; true only where no change was required
        assert c.claimed
        if tasks[task].spec.expectation.diff == "required":
            assert c.claim_vs_outcome == "FALSE_SUCCESS"
