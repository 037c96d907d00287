"""``grid.py check`` on transcripts the real coding-agent programs wrote (tests/fixtures/transcripts/
README.md), against the task's repository: the native readers, the shell parser and the coverage
rule together give the grid's own classification of the same review."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.tasks import GIT_ENV, load_tasks

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "transcripts"
REVIEWS = [
    "claude-code/review.stream.jsonl",
    "claude-code/review.session.jsonl",
    "codex/review.exec.jsonl",
    "codex/review.rollout.jsonl",
    "atif/claude-code.review.trajectory.json",
]


@pytest.fixture(scope="module")
def review_repo(tmp_path_factory):
    """The review-change task's fixture as a repository (what the agents above were run in)."""
    task = load_tasks()["review-change"]
    repo = tmp_path_factory.mktemp("review") / "repo"
    shutil.copytree(task.repo, repo)
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fixture"]):
        subprocess.run(["git", *argv], cwd=repo, env={**os.environ, **GIT_ENV}, check=True)
    return task, repo


@pytest.mark.parametrize("name", REVIEWS)
def test_the_real_agent_programs_transcripts_check_as_the_grid_does(name, review_repo, tmp_path):
    """Claude Code 2.1.328 and Codex 0.169.0 themselves (the grid's locked builds), driven by the
    numbered-reviewer reference model through the gateway on review-change, and Harbor's ATIF of the
    Claude Code session (README.md): each
    output form reads, its shell reads count by coverage against the repository, and the
    review checks as the grid classifies it (consistent, PASS, TRUE_SUCCESS)."""
    task, repo = review_repo
    log = tmp_path / "log.jsonl"
    assert (
        main(
            [
                "check",
                "--transcript",
                str(FIX / name),
                "--repo",
                str(repo),
                "--expectation",
                str(task.folder / "task.toml"),
                "--role",
                task.role,
                "--log",
                str(log),
            ]
        )
        == 0
    )
    row = json.loads(log.read_text())
    v = row["verdict"]
    assert (v["claim_verdict"], v["outcome"], v["claim_vs_outcome"]) == ("consistent", "PASS", "TRUE_SUCCESS"), row
    assert set(v["evidence"]["opened"]) >= set(task.spec.expectation.review.must_open)
    agent = name.split("/")[-1].split(".")[0] if name.startswith("atif/") else name.split("/")[0]  # Harbor's ATIF of it
    assert row["transcript_agent"] == agent and row["transcript_truncated"] is None


def test_the_repository_wins_over_a_recorded_verdict(review_repo, tmp_path, capsys):
    """Both given: the outcome is the repository's verifier's, the recorded one is kept beside it."""
    task, repo = review_repo
    log = tmp_path / "log.jsonl"
    assert (
        main(
            [
                "check",
                "--transcript",
                str(FIX / REVIEWS[0]),
                "--repo",
                str(repo),
                "--expectation",
                str(task.folder / "task.toml"),
                "--role",
                task.role,
                "--outcome-from",
                str(FIX / "minimal" / "junit.fail.xml"),
                "--log",
                str(log),
            ]
        )
        == 0
    )
    row = json.loads(log.read_text())
    assert row["verdict"]["outcome"] == "PASS" and row["outcome_from"] == "verifier"
    assert row["external_outcome"]["outcome"] == "TESTS_FAIL"
    assert "external outcome (junit xml, the repository's verifier wins): TESTS_FAIL" in capsys.readouterr().out
