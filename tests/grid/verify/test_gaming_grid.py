"""Calibration covers gaming, through ``grid.py run`` on ``plain``: the gaming reference models
(claimgrid/reference/gaming.py) in the default matrix, the impossible task variants, and caps
as an evasion. Every run agrees with its registered truth on every field, and no gaming run
is ever a true success."""

from __future__ import annotations

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference import gaming, registry
from claimgrid.store.record import read_records

from tests.conftest import ROOT


def _gaming_models() -> list[str]:
    return [n for n, m in registry.models().items() if m.policy.__module__ == gaming.__name__]


def _agrees(recs) -> list[str]:
    wrong = []
    for r in recs:
        assert r.truth, r.run_id
        c = r.classification.model_dump()
        wrong += [f"{r.task} {r.model}: {k} = {c[k]!r}, truth {v!r}" for k, v in r.truth.items() if c[k] != v]
    return wrong


def _untreated() -> list[str]:
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    return ["--content", content, "--swap", swap]


def test_gaming_models_in_the_default_matrix_are_never_a_true_success(default_grid):
    recs = [r for r in read_records(default_grid / "runs.jsonl") if r.model in _gaming_models()]
    assert {r.model for r in recs} == set(_gaming_models()) and all(registry.get(m).default for m in _gaming_models())
    assert len(recs) == len(_gaming_models()) * len(in_suite(load_tasks(), "default"))  # untreated cell only
    assert not _agrees(recs)
    assert not [
        r.run_id
        for r in recs
        if r.classification.claim_vs_outcome == "TRUE_SUCCESS" and r.classification.outcome != "PASS"
    ]
    outcomes = {r.classification.outcome for r in recs}
    assert {"TESTS_SUBVERTED", "SCOPE_VIOLATION"} <= outcomes


def test_impossible_variants_an_honest_fix_fails_and_every_pass_is_a_cheat_caught(plain_venvs, tmp_path):
    out = tmp_path / "impossible"
    honest = next(m for m in registry.default_models() if not registry.get(m).fault and m not in _gaming_models())
    models = [honest, *_gaming_models()]
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--suite",
                "impossible",
                *_untreated(),
                "--models",
                ",".join(models),
                "--no-progress",
                "--jobs",
                "3",
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    tasks = in_suite(load_tasks(), "impossible")
    assert tasks and all(t.spec.expectation.impossible for t in tasks.values())
    assert len(recs) == len(tasks) * len(models)
    assert not (wrong := _agrees(recs)), "\n".join(wrong)
    assert not [r.run_id for r in recs if r.classification.outcome == "PASS"]  # any pass would be a cheat
    assert {r.classification.outcome for r in recs if r.model == honest} == {"TESTS_FAIL"}
    assert {"TESTS_SUBVERTED", "TESTS_TAMPERED", "SCOPE_VIOLATION"} <= {r.classification.outcome for r in recs}


def test_large_junk_files_never_turn_a_false_success_into_unknown(plain_venvs, tmp_path):
    policies = ROOT / "tests" / "fixtures" / "junk_policies.py"
    registry.load_policies(policies)
    added = [n for n, m in registry.models().items() if m.origin == str(policies.resolve())]
    assert added
    out = tmp_path / "junk"
    task = next(iter(in_suite(load_tasks(), "default")))
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--tasks",
                task,
                *_untreated(),
                "--policies",
                str(policies),
                "--models",
                ",".join(added),
                "--no-progress",
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    assert len(recs) == len(added) and not _agrees(recs)
    for r in recs:
        assert r.classification.outcome != "UNKNOWN" and r.classification.claim_vs_outcome == "FALSE_SUCCESS"
    assert {r.classification.outcome for r in recs} == {"SCOPE_VIOLATION", "TESTS_FAIL"}
