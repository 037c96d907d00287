"""``grid.py verify REPO EXPECTATION``: the grid's verifier as a CI gate on any repository.

The same code path as a grid run's verification (:func:`claimgrid.verify.verifier.verify`,
then :func:`claimgrid.classify.classifier.classify_outcome`): the diff of the work tree
against a base commit, read by the harness itself; required files and exact contents;
allowed and protected paths; the test command re-run in the guard's sandbox on a throwaway
view with the tamper-evident checks (canaries, the runner's own report against its exit
status, the changed test files restored). The repository is never written.

EXPECTATION is a TOML file with an ``[expectation]`` table in the format of ``task.toml``'s
(a task.toml itself works) and, optionally, a ``[verify]`` table (``test_files``,
``hidden_tests`` relative to the file's folder). The base is ``--base REV``, else the merge
base of ``HEAD`` with its upstream when the branch has one, else ``HEAD``.

Exit status: 0 ``VERIFICATION PASSED`` (the outcome is ``PASS``), 1 ``VERIFICATION FAILED``
(one line per failed check first; an empty diff where a change is required is its own
failure), 2 bad input (one line naming the file and the field or flag).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from claimgrid.classify.classifier import classify_outcome
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.inputs.schema import Strict, load_toml, validate
from claimgrid.inputs.tasks import GIT_ENV, Expectation, Task, VerifySpec
from claimgrid.sandbox.guard import detect
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, verify


class _GateFile(Strict):
    expectation: Expectation
    verify: VerifySpec


class BadInput(ClaimgridError):
    """A user error of ``verify`` / ``check`` (exit 2)."""


class ExternalTask(Task):
    """A repository outside claimgrid seen as a task: only what the verifier reads."""

    def __init__(self, expectation: Expectation, verify_spec: VerifySpec, folder: Path, python: str):
        self.folder = folder
        self.repo = folder
        self._python = python
        spec = SimpleNamespace(
            id="external", expectation=expectation, verify=verify_spec, attacker_goal=None, legitimate_note=None
        )
        self.spec = cast(Any, spec)

    @property
    def python(self) -> str:
        return self._python


def load_expectation(path: Path, python: str) -> ExternalTask:
    """The expectation file as an :class:`ExternalTask`; a bad file is one line naming the field."""
    if not path.is_file():
        raise BadInput(f"{path}: no such expectation file")
    data = load_toml(path)
    if "expectation" not in data:
        raise DataError(path, "expectation", "the file has no [expectation] table")
    # Only the tables the verifier reads (a task.toml's other tables are left alone).
    gate = validate(_GateFile, {"expectation": data["expectation"], "verify": data.get("verify") or {}}, path)
    exp, spec = gate.expectation, gate.verify
    if spec.hidden_tests and not (path.parent / spec.hidden_tests).is_dir():
        raise DataError(path, "verify.hidden_tests", f"'{spec.hidden_tests}' is not a folder beside the file")
    return ExternalTask(exp, spec, path.parent.resolve(), python)


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=check
    )


def resolve_base(repo: Path, base: str | None) -> str:
    """The base commit id: ``base``, else the merge base with the upstream, else HEAD."""
    if not (repo / ".git").exists():
        raise BadInput(f"{repo}: not a git repository (REPO)")
    if base:
        found = _git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", check=False)
        if found.returncode != 0:
            raise BadInput(f"--base {base}: not a commit of {repo}")
        return found.stdout.strip()
    upstream = _git(repo, "rev-parse", "--verify", "--quiet", "@{upstream}", check=False)
    if upstream.returncode == 0:
        merged = _git(repo, "merge-base", "HEAD", upstream.stdout.strip(), check=False)
        if merged.returncode == 0 and merged.stdout.strip():
            return merged.stdout.strip()
    head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if head.returncode != 0:
        raise BadInput(f"{repo}: has no commit to diff against (give --base)")
    return head.stdout.strip()


def base_tree(repo: Path, base: str, dest: Path) -> Path:
    """The base commit checked out in ``dest`` (a shared clone: the repository's objects are
    an alternate, nothing of the repository is written): the verifier's template."""
    _git(dest.parent, "clone", "-q", "--shared", "--no-checkout", str(repo.resolve()), str(dest))
    _git(dest, "checkout", "-q", "--detach", base)
    return dest


def failed_checks(events: list[dict], outcome: str) -> list[str]:
    """One line per failed check, from the verifier's events (the same the classifier read)."""
    by = {e["kind"]: e for e in events if e.get("source") == "verifier"}
    diff, scope, files, tests = (by.get(k) or {} for k in ("diff", "scope", "required_files", "tests"))
    lines = []
    if diff.get("files") is None:
        lines.append(f"diff: not taken ({diff.get('error')})")
    elif diff.get("expected") == "required" and diff.get("empty"):
        lines.append("empty diff: nothing changed against the base, and a change is required")
    if diff.get("oversized"):
        lines.append(f"over a cap, listed unread: {', '.join(diff['oversized'])}")
    if scope.get("outside_allowed"):
        lines.append(f"changed outside allowed_paths: {', '.join(scope['outside_allowed'])}")
    if scope.get("protected_touched"):
        lines.append(f"changed protected_paths: {', '.join(scope['protected_touched'])}")
    if files.get("missing"):
        lines.append(f"required files missing: {', '.join(files['missing'])}")
    if files.get("content_mismatch"):
        lines.append(f"exact contents differ: {', '.join(files['content_mismatch'])}")
    if tests:
        if tests.get("subverted"):
            lines.append(f"tests subverted: {'; '.join(tests['subverted'])}")
        elif tests.get("tampered"):
            lines.append(
                f"tests pass only with the changed test files ({', '.join(tests.get('changed_tests') or [])}): "
                "the fixture's own tests restored give another result"
            )
        elif tests.get("passed") is None:
            lines.append(f"tests: not known ({tests.get('reason') or 'no result'})")
        elif not tests.get("passed"):
            tail = [ln for ln in (tests.get("output_tail") or "").splitlines() if ln.strip()]
            restored = tests.get("restored") or {}
            where = " (with the hidden or restored tests)" if tests.get("exit_code") == 0 and restored else ""
            lines.append(f"tests failed{where}, exit {tests.get('exit_code')}: {tail[-1] if tail else 'no output'}")
    if outcome != "PASS" and not lines:
        lines.append(f"outcome {outcome}")
    return lines


def run_verify(repo: Path, expectation: Path, base: str | None, python: str | None, guard_mode: str) -> dict:
    """The verification of ``repo`` against ``expectation``: the report ``--json`` prints."""
    repo = repo.resolve()
    task = load_expectation(expectation, python or sys.executable)
    commit = resolve_base(repo, base)
    guard = detect(guard_mode)
    scratch = Path(tempfile.mkdtemp(prefix="claimgrid-gate-"))
    try:
        template = base_tree(repo, commit, scratch / "base")
        events = verify(
            task,
            None,
            FinishedRun(template, repo, commit),
            options=VerifyOptions(guard=guard, git_dir=False),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outcome = classify_outcome(events)
    return {
        "verdict": "PASSED" if outcome == "PASS" else "FAILED",
        "outcome": outcome,
        "repository": str(repo),
        "base": commit,
        "guard": guard.enabled,
        "failures": failed_checks(events, outcome),
        "events": events,
    }


def cmd_verify(args) -> int:
    if args.guard not in ("auto", "on", "off"):
        raise BadInput(f"--guard {args.guard}: one of auto, on, off")
    report = run_verify(args.repo, args.expectation, args.base, args.python, args.guard)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        for line in report["failures"]:
            print(line)
        print(f"VERIFICATION {report['verdict']}")
    return 0 if report["verdict"] == "PASSED" else 1


def add_parser(sub) -> None:
    vp = sub.add_parser(
        "verify",
        help="verify a repository's change against an expectation file (exit 0 passed, 1 failed, 2 bad input)",
    )
    vp.add_argument("repo", type=Path, metavar="REPO", help="the git work tree the agent changed")
    vp.add_argument("expectation", type=Path, metavar="EXPECTATION", help="a TOML file with an [expectation] table")
    vp.add_argument(
        "--base", default=None, help="the commit to diff against (default: merge base with upstream, or HEAD)"
    )
    vp.add_argument("--python", default=None, help="the interpreter {python} names in test_command (default: this one)")
    vp.add_argument("--guard", default="auto", help="auto (default), on or off: the test run's sandbox")
    vp.add_argument("--json", action="store_true", help="print the whole report as JSON")
