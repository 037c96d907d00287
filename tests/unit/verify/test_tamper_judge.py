"""The tamper-evident judgement (claimgrid.verify.tamper.judge): the exit status, the runner's
own report and the canaries, set against each other, table-driven. No process runs here; the
real runs are in tests/integration/verify/test_tamper_runs.py."""

from __future__ import annotations

import json

import pytest

from claimgrid.verify.tamper import BOOT, Canaries, instrument, judge, runner_of


def _report(c: Canaries, own: dict, canaries=("passed", "xfailed"), exitstatus=None, raised=(), collect=0) -> bytes:
    tests = {f"pkg.T.{name}": outcome for name, outcome in own.items()}
    if canaries[0] is not None:
        tests[f"{c.names['mod']}.{c.names['cls']}.{c.names['pass']}"] = canaries[0]
    if canaries[1] is not None:
        tests[f"{c.names['mod']}.{c.names['cls']}.{c.names['fail']}"] = canaries[1]
    return json.dumps({"tests": tests, "collect_errors": collect, "raised_but_passed": list(raised),
                       "exitstatus": exitstatus}).encode()


OK, FAIL = {"test_a": "passed", "test_b": "passed"}, {"test_a": "passed", "test_b": "failed"}

# (case, runner, exit code, report args or None for no report, passed, subverted?)
CASES = [
    ("honest pass", "unittest", 0, dict(own=OK), True, False),
    ("honest fail", "unittest", 1, dict(own=FAIL), False, False),
    ("failures dropped: exit 0 with a failure recorded", "unittest", 0, dict(own=FAIL), False, True),
    ("assertion replaced: the must-fail canary passed", "unittest", 1, dict(own=OK, canaries=("passed", "xpassed")),
     False, True),
    ("the must-pass canary failed", "unittest", 1, dict(own=OK, canaries=("failed", "xfailed")), False, True),
    ("exit 0 without the report", "unittest", 0, None, False, True),
    ("exit 1 without the report: a crash, not a pass", "unittest", 1, None, False, False),
    ("exit 0 and a canary never ran", "unittest", 0, dict(own=OK, canaries=("passed", None)), False, True),
    ("exit 1 with a failure and no canaries (stopped early)", "unittest", 1, dict(own=FAIL, canaries=(None, None)),
     False, False),
    ("exit 1 while the report records nothing wrong", "unittest", 1, dict(own=OK), False, True),
    ("pytest honest pass", "pytest", 0, dict(own=OK, exitstatus=0), True, False),
    ("pytest exit forced to 0 (pytest meant 1)", "pytest", 0, dict(own=FAIL, exitstatus=1), False, True),
    ("pytest report rewritten: a call raised, reported passed", "pytest", 0,
     dict(own=OK, exitstatus=0, raised=["t::test_b"]), False, True),
    ("pytest collection error, honest", "pytest", 2, dict(own={}, canaries=(None, None), exitstatus=2, collect=1),
     False, False),
]


@pytest.mark.parametrize("case, runner, code, report, passed, subverted", CASES, ids=[c[0] for c in CASES])
def test_judge(case, runner, code, report, passed, subverted):
    c = Canaries.fresh(runner)
    out = judge(code, _report(c, **report) if report is not None else None, c)
    assert out["passed"] is passed, out
    assert bool(out["integrity"].get("subverted")) is subverted, out


def test_canaries_are_fresh_each_run_and_the_command_keeps_its_arguments():
    a, b = Canaries.fresh("unittest"), Canaries.fresh("unittest")
    assert a.names != b.names and len({*a.names.values()} & {*b.names.values()}) == 0
    cmd = ["/py", "-m", "unittest", "discover", "-s", "tests"]
    argv = instrument(cmd, a, 7)
    assert argv[:3] == ["/py", "-c", BOOT] and argv[4:] == cmd[1:] and json.loads(argv[3])["fd"] == 7


@pytest.mark.parametrize("command, runner", [
    (["/venv/bin/python", "-m", "pytest", "-q"], "pytest"),
    (["python3", "-m", "unittest"], "unittest"),
    (["/venv/bin/python", "run_tests.py"], None),
    (["bash", "-m", "pytest"], None),
])
def test_only_known_runners_are_instrumented(command, runner):
    assert runner_of(command, "/venv/bin/python") == runner


def test_an_unknown_runner_is_judged_by_its_exit_status_and_says_so():
    assert judge(0, None, None) == {"passed": True, "integrity": {"runner": None, "basis": "exit status only"}}
