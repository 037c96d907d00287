"""The real-task suite end to end on one framework: reference models classified as documented,
and every upstream suite run by the verifier from the task's own interpreter.

Runs ``grid.py run --suite real`` as a user does (real venv, adapter, gateway, verifier).
The suite's tasks and the framework are read from ``tasks/`` and ``venvs.toml``.
"""

import subprocess
import sys

import pytest

from claimgrid.inputs.tasks import load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.reference.truth import expected_claim_verdict
from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT

pytestmark = [pytest.mark.frameworks, pytest.mark.deep]

SUITE = "real"
MODELS = ("diligent", "narrator", "reader")


@pytest.fixture(scope="module")
def real_grid(tmp_path_factory):
    framework = next(iter(load_venvs()))
    out = tmp_path_factory.mktemp("real") / "grid"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--suite",
            SUITE,
            "--frameworks",
            framework,
            "--models",
            ",".join(MODELS),
            "--content",
            "clean",
            "--swap",
            "none",
            "--no-progress",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = read_runs(out / "runs.jsonl").values
    return out, runs


def test_the_suite_is_the_tasks_marked_real(real_grid):
    _, runs = real_grid
    suite = {t.id for t in load_tasks().values() if t.suite == SUITE}
    assert {r["task"] for r in runs} == suite
    assert len(runs) == len(suite) * len(MODELS)
    roles = {t.role for t in load_tasks().values() if t.suite == SUITE}
    assert roles == {"builder", "reviewer", "reporter"}


def test_reference_models_are_classified_as_documented(real_grid):
    _, runs = real_grid
    for r in runs:
        c = r["classification"]
        assert c["process"] == "ok", (r["run_id"], c)
        assert c["claim_verdict"] == expected_claim_verdict(r["model"], r["role"]), (r["run_id"], c)
        if r["model"] == "diligent":
            assert (c["outcome"], c["claim_vs_outcome"]) == ("PASS", "TRUE_SUCCESS"), (r["run_id"], c)
        else:
            assert c["outcome"] != "PASS" and c["claim_vs_outcome"] == "FALSE_SUCCESS", (r["run_id"], c)


def test_each_upstream_suite_ran_from_the_task_interpreter(real_grid):
    out, runs = real_grid
    tasks = load_tasks()
    for r in runs:
        task = tasks[r["task"]]
        events = read_events(out / r["evidence_dir"] / "events.jsonl")
        tests = [e for e in events if e["source"] == "verifier" and e["kind"] == "tests"]
        assert len(tests) == 1, r["run_id"]
        assert tests[0]["command"] == task.test_command()
        if task.env is not None:
            venv_python = task.env.venv_python
            assert tests[0]["command"][0] == str(venv_python.parent.resolve() / venv_python.name)
        output = (out / r["evidence_dir"] / "test_output.txt").read_text()
        assert output == tests[0]["output_tail"]
        if r["model"] == "diligent":
            # pytest's or unittest's own summary line: the upstream suite really ran, and passed
            assert " passed" in output or output.rstrip().endswith("OK"), (r["run_id"], output[-500:])
        assert r["task_provenance"] == task.provenance() and r["task_provenance"]["repository"].startswith("https://")
