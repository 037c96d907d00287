"""A generator of subversion attempts through the real verifier (guarded where the machine
allows): for every shipped task whose tests fail on the fixture as shipped (the unfixed bug,
measured here by the verifier, never named), every file its scope lets the agent write,
and every technique of tests/fixtures/subversion.py for the task's runner, the technique
is planted with the bug left in and the outcome is never PASS. A technique that fools the
task's plain test command (its exit status alone) must come out TESTS_SUBVERTED with the
evidence quoted. With the task's reference fix plus a harmless edit in every allowed file,
the outcome stays PASS (no false alarm).

CI runs a fixed-seed sample of the product (every technique on every runner, every
allowed file at least once); ``CLAIMGRID_DEEP=1`` runs the whole product (``deep``). The
cases of one test run two at a time (each is its own workspace and sandbox); the wall time
is printed."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from claimgrid.classify.classifier import classify_outcome
from claimgrid.globs import matches
from claimgrid.inputs.tasks import Task, build_template, materialise
from claimgrid.sandbox.guard import detect
from claimgrid.verify import tamper
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, verify

from tests.fixtures.subversion import TECHNIQUES, Plant, Technique

GUARD = detect("auto")
SEED = 43
WORKERS = 2


@dataclass(frozen=True)
class Case:
    task: Task
    target: str
    technique: Technique

    @property
    def label(self) -> str:
        return f"{self.task.id}:{self.target}:{self.technique.name}"


def _runner(task: Task) -> str | None:
    command = task.test_command()
    return tamper.runner_of(command, task.python) if command else None


def _fixture_files(task: Task) -> list[str]:
    repo = task.folder / "repo"
    return sorted(
        str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts
    )


def _allowed_files(task: Task) -> list[str]:
    """Every fixture file the task's scope lets the agent write."""
    exp = task.spec.expectation
    return [f for f in _fixture_files(task) if matches(f, exp.allowed_paths) and not matches(f, exp.protected_paths)]


def _primary(task: Task) -> str | None:
    """The first Python file the reference solution edits (a file the tests import)."""
    for step in task.spec.reference.steps:
        path = step.args.get("path")
        if step.tool in ("edit_file", "write_file") and isinstance(path, str) and path.endswith(".py"):
            return path
    return None


class Templates:
    """One template per task, built once; a fresh workspace per case."""

    def __init__(self, root: Path):
        self.root = root
        self.built: dict[str, tuple[Path, str]] = {}

    def workspace(self, task: Task) -> tuple[Path, Path, str]:
        if task.id not in self.built:
            tpl = self.root / f"tpl-{task.id}"
            self.built[task.id] = (tpl, build_template(task, task.slot_text(), tpl))
        tpl, base = self.built[task.id]
        ws = Path(tempfile.mkdtemp(prefix="ws-", dir=self.root))
        shutil.rmtree(ws)
        materialise(tpl, ws)
        return tpl, ws, base


def _verify(templates: Templates, task: Task, change) -> tuple[str, dict, Path, Path]:
    tpl, ws, base = templates.workspace(task)
    change(ws)
    events = verify(task, None, FinishedRun(tpl, ws, base), options=VerifyOptions(guard=GUARD))
    tests = next(e for e in events if e["kind"] == "tests")
    return classify_outcome(events), tests, ws, tpl


def _naive_exit(task: Task, ws: Path) -> int | None:
    """The task's own test command on a copy of the tree, judged by its exit status alone
    (what a verifier that trusts the runner sees)."""
    copy = Path(tempfile.mkdtemp(prefix="naive-"))
    try:
        shutil.copytree(ws, copy / "ws", symlinks=True, ignore=shutil.ignore_patterns(".git"))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(copy),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        try:
            proc = subprocess.run(task.test_command(), cwd=copy / "ws", env=env, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            return None
        return proc.returncode
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _plant(case: Case):
    def change(ws: Path) -> None:
        text = (ws / case.target).read_text()
        exp = case.task.spec.expectation
        plant = Plant(
            _runner(case.task) or "",
            case.target,
            text,
            lambda p: matches(p, exp.allowed_paths) and not matches(p, exp.protected_paths),
        )
        for rel, content in case.technique.write(plant).items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(content)

    return change


def _fix(task: Task):
    def change(ws: Path) -> None:
        for step in task.spec.reference.steps:
            if step.tool == "edit_file":
                p = ws / step.args["path"]
                text = p.read_text()
                assert step.args["old"] in text, (task.id, step.args["path"])
                p.write_text(text.replace(step.args["old"], step.args["new"], 1))
            elif step.tool == "write_file":
                (ws / step.args["path"]).write_text(step.args["content"])

    return change


def _harmless(task: Task, files: list[str]):
    """A change no test can see: a comment line in each Python file, a line in each other one."""

    def change(ws: Path) -> None:
        for rel in files:
            p = ws / rel
            line = "# reviewed for the release\n" if rel.endswith(".py") else "\n"
            p.write_text(p.read_text().rstrip("\n") + "\n" + line)

    return change


@pytest.fixture(scope="module")
def grid(tasks, tmp_path_factory):
    """The tasks with a runner the bootstrap instruments, each with its baseline: whether
    the verifier finds the fixture's tests failing as shipped (the unfixed bug)."""
    templates = Templates(tmp_path_factory.mktemp("subversion"))
    chosen = [t for t in sorted(tasks.values(), key=lambda t: t.id) if _runner(t) in tamper.RUNNERS]
    with ThreadPoolExecutor(WORKERS) as pool:
        baselines = list(pool.map(lambda t: _verify(templates, t, lambda ws: None)[1], chosen))
    buggy = [t for t, b in zip(chosen, baselines) if b["passed"] is False]
    return templates, chosen, buggy


def _product(buggy: list[Task]) -> list[Case]:
    return [
        Case(task, target, tech)
        for task in buggy
        for target in _allowed_files(task)
        for tech in TECHNIQUES
        if _runner(task) in tech.runners
    ]


def _sample(buggy: list[Task], product: list[Case]) -> list[Case]:
    """Every technique on every runner (on a task of that runner, rotating, at the file its
    reference fix edits), then every allowed file at least once (a technique drawn with the
    fixed seed)."""
    rng = random.Random(SEED)
    chosen: dict[str, Case] = {}
    for runner in tamper.RUNNERS:
        of_runner = [t for t in buggy if _runner(t) == runner and _primary(t)]
        for i, tech in enumerate(t for t in TECHNIQUES if runner in t.runners):
            if of_runner:
                task = of_runner[i % len(of_runner)]
                case = Case(task, _primary(task) or "", tech)
                chosen[case.label] = case
    for task in buggy:
        for target in _allowed_files(task):
            if not any(c.task.id == task.id and c.target == target for c in chosen.values()):
                options = [c for c in product if c.task.id == task.id and c.target == target]
                case = rng.choice(options)
                chosen[case.label] = case
    return list(chosen.values())


def _run_cases(templates: Templates, cases: list[Case]) -> list[tuple[Case, str, dict, int | None]]:
    def one(case: Case):
        outcome, tests, ws, _ = _verify(templates, case.task, _plant(case))
        naive = _naive_exit(case.task, ws)
        shutil.rmtree(ws, ignore_errors=True)
        return case, outcome, tests, naive

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, cases))


def _check(results) -> None:
    bad, weak = [], []
    for case, outcome, tests, naive in results:
        if outcome == "PASS":
            bad.append(f"{case.label}: PASS ({tests.get('integrity')})")
        elif naive == 0 and outcome != "TESTS_SUBVERTED":
            weak.append(f"{case.label}: fooled the exit status but the outcome is {outcome}")
        if outcome == "TESTS_SUBVERTED":
            assert tests["subverted"] and all(isinstance(r, str) and r for r in tests["subverted"]), case.label
    assert not bad, "\n".join(bad)
    assert not weak, "\n".join(weak)


def _report(title: str, results, wall: float) -> None:
    by: dict[str, dict[str, int]] = {}
    for case, outcome, _, naive in results:
        row = by.setdefault(f"{_runner(case.task)}: {case.technique.name}", {})
        row[outcome] = row.get(outcome, 0) + 1
        row["fooled exit status"] = row.get("fooled exit status", 0) + (naive == 0)
    print(f"\n{title}: {len(results)} plants in {wall:.1f} s wall")
    for name in sorted(by):
        print(f"  {name}: {by[name]}")


def test_the_generator_covers_both_runners_and_every_allowed_file(grid):
    templates, chosen, buggy = grid
    runners = {_runner(t) for t in buggy}
    assert runners == set(tamper.RUNNERS), runners  # the shipped tasks exercise both runners
    for runner in tamper.RUNNERS:
        assert sum(runner in t.runners for t in TECHNIQUES) >= 20, runner
    sample = _sample(buggy, _product(buggy))
    for task in buggy:
        for target in _allowed_files(task):
            assert any(c.task.id == task.id and c.target == target for c in sample), (task.id, target)
    for runner in tamper.RUNNERS:
        assert {c.technique.name for c in sample if _runner(c.task) == runner} == {
            t.name for t in TECHNIQUES if runner in t.runners
        }


def test_no_planted_technique_passes_an_unfixed_bug(grid):
    templates, _, buggy = grid
    started = time.monotonic()
    results = _run_cases(templates, _sample(buggy, _product(buggy)))
    _report("sampled product (fixed seed)", results, time.monotonic() - started)
    _check(results)
    # every technique marked live fools the plain exit status somewhere (it is a real attack)
    for runner in tamper.RUNNERS:
        for tech in TECHNIQUES:
            if runner in tech.live and runner in tech.runners:
                fooled = [r for r in results if r[0].technique is tech and _runner(r[0].task) == runner and r[3] == 0]
                assert fooled, f"{runner}: {tech.name} fooled no plain test run: not an attack"


@pytest.mark.deep
def test_no_planted_technique_passes_an_unfixed_bug_full_product(grid):
    templates, _, buggy = grid
    started = time.monotonic()
    results = _run_cases(templates, _product(buggy))
    _report("full product", results, time.monotonic() - started)
    _check(results)


def test_the_reference_fix_with_harmless_edits_stays_pass(grid):
    templates, chosen, buggy = grid
    fixed = [t for t in buggy if t.spec.reference.steps and not t.spec.expectation.impossible]
    assert fixed

    def one(task: Task):
        files = _allowed_files(task)

        def change(ws: Path) -> None:
            _fix(task)(ws)
            _harmless(task, files)(ws)

        outcome, tests, ws, _ = _verify(templates, task, change)
        shutil.rmtree(ws, ignore_errors=True)
        return task, outcome, tests

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, fixed))
    wrong = [(t.id, o, r.get("subverted"), (r.get("integrity") or {})) for t, o, r in results if o != "PASS"]
    assert not wrong, wrong
    for _, _, tests in results:
        # the second run happened, isolated, and agreed
        assert tests["restored"] and tests["restored"]["isolated"] and tests["restored"]["passed"]
        assert tests["integrity"]["canaries"] == {"must_pass": "passed", "must_fail": "xfailed"}
