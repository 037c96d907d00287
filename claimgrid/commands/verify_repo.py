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

The tree weighed is the work tree as a fresh clone plus the change would hold it: every
path but the top-level ``.git``, the untracked paths git itself ignores in that checkout
(its ``.gitignore`` files and ``.git/info/exclude``; no global or system git config is
read) and the untracked paths matching an ``--ignore GLOB`` (``**`` spans folders, ``*``
stays in one; a folder matched is left out whole). A path of the base commit is always
weighed, ignored or not: its change is a change. The weighed paths are copied (symlinks as
symlinks, never followed; the caps of :mod:`claimgrid.caps` hold while copying) into a
scratch folder the verifier reads and tests; what was left out is listed in the report's
``not_weighed``.

A review expectation (``[expectation.review]``) needs what only the agent's transcript
shows (the files it opened, the verdict it gave): without one the outcome is ``UNKNOWN``
with that reason; ``grid.py check --transcript`` supplies it.

Exit status: 0 ``VERIFICATION PASSED`` (the outcome is ``PASS``), 1 ``VERIFICATION FAILED``
(one line per failed check first; an empty diff where a change is required is its own
failure), 2 bad input (one line naming the file and the field or flag).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from claimgrid import caps
from claimgrid.classify.classifier import classify_outcome
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.globs import matches
from claimgrid.inputs.schema import Strict, load_toml, validate
from claimgrid.inputs.tasks import GIT_ENV, Expectation, Task, VerifySpec
from claimgrid.sandbox.guard import detect
from claimgrid.verify.cache import VerifyCache
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, verify
from claimgrid.verify.workspace import LimitExceeded


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


def _ignored(repo: Path) -> tuple[set[str], set[str]]:
    """(files, folders) git ignores in ``repo``'s work tree, untracked, relative paths."""
    out = _git(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    files, folders = set(), set()
    for path in out.stdout.split("\0"):
        if path.endswith("/"):
            folders.add(path.rstrip("/"))
        elif path:
            files.add(path)
    return files, folders


def _base_paths(repo: Path, commit: str) -> tuple[set[str], set[str]]:
    """(paths, folders) of the base commit's tree."""
    out = _git(repo, "ls-tree", "-r", "-z", "--name-only", commit)
    paths = {p for p in out.stdout.split("\0") if p}
    folders = {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)}
    return paths, folders


def weighed_copy(repo: Path, commit: str, ignore: list[str], dest: Path) -> list[str]:
    """Copy the tree weighed (module doc) of ``repo`` into the new folder ``dest``; returns
    the paths left out (outermost only). Raises :class:`claimgrid.verify.workspace.LimitExceeded`
    over a workspace cap (entries, apparent bytes, depth) or for what cannot be read: the
    reason is the result."""
    ignored_files, ignored_folders = _ignored(repo)
    in_base, base_folders = _base_paths(repo, commit)
    left_out: list[str] = []
    count = total = 0

    def weighed(rel: str, is_dir: bool) -> bool:
        if rel in in_base or rel in base_folders:
            return True
        return not (rel in (ignored_folders if is_dir else ignored_files) or matches(rel, ignore))

    def copy(rel: str, entry: os.DirEntry) -> bool:
        """Copy one entry; True for a folder to walk."""
        nonlocal count, total
        st = entry.stat(follow_symlinks=False)
        is_dir = stat.S_ISDIR(st.st_mode)
        if not weighed(rel, is_dir):
            left_out.append(rel)
            return False
        count, total = count + 1, total + st.st_size
        for over, cap, name in (
            (count > caps.MAX_WORKSPACE_FILES, f"more than {caps.MAX_WORKSPACE_FILES} entries", "MAX_WORKSPACE_FILES"),
            (total > caps.MAX_WORKSPACE_BYTES, f"over {caps.MAX_WORKSPACE_BYTES} bytes", "MAX_WORKSPACE_BYTES"),
        ):
            if over:
                raise LimitExceeded(f"the tree weighed has {cap} (cap {name}; --ignore what is not the change)")
        target = dest / rel
        if is_dir:
            target.mkdir()
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(entry.path), target)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(entry.path, target, follow_symlinks=False)
            os.chmod(target, stat.S_IMODE(st.st_mode))
        # sockets, fifos, devices: git records none of them either
        return is_dir

    dest.mkdir()
    stack = [("", 0)]
    try:
        while stack:
            rel_dir, depth = stack.pop()
            if depth > caps.MAX_WORKSPACE_DEPTH:
                raise LimitExceeded(f"the tree weighed is more than {caps.MAX_WORKSPACE_DEPTH} folders deep")
            with os.scandir(repo / rel_dir if rel_dir else repo) as entries:
                for entry in entries:
                    rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                    if rel != ".git" and copy(rel, entry):
                        stack.append((rel, depth + 1))
    except OSError as exc:  # an unreadable folder or file: the reason is the result
        raise LimitExceeded(f"cannot read the tree weighed: {exc}") from exc
    return sorted(left_out)


class Gate:
    """A repository prepared for verification: the expectation, the base commit checked out
    (the template) and the tree weighed copied, in one scratch folder (removed by
    :meth:`close`). :meth:`events` verifies it; a gate verifies the same tree many times
    (``grid.py check`` on the runs of one change) with each run's transcript."""

    def __init__(
        self,
        repo: Path,
        expectation: Path,
        base: str | None,
        python: str | None,
        guard_mode: str,
        ignore: Sequence[str] = (),
    ):
        self.repo = repo.resolve()
        self.task = load_expectation(expectation, python or sys.executable)
        self.commit = resolve_base(self.repo, base)
        self.guard = detect(guard_mode)
        self.scratch = Path(tempfile.mkdtemp(prefix="claimgrid-gate-"))
        self.limit: str | None = None
        self.not_weighed: list[str] = []
        try:
            self.template = base_tree(self.repo, self.commit, self.scratch / "base")
            try:
                self.not_weighed = weighed_copy(self.repo, self.commit, list(ignore), self.scratch / "tree")
            except LimitExceeded as exc:
                self.limit = str(exc)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def review(self) -> bool:
        return self.task.spec.expectation.review is not None

    def events(
        self,
        tool_events: Sequence[dict] | None = None,
        gateway_events: Sequence[dict] = (),
        cache: VerifyCache | None = None,
    ) -> list[dict]:
        """The verifier's events for the tree; ``tool_events``/``gateway_events``: the agent's
        transcript as harness events (None: no transcript). ``cache``: a verify cache shared
        by the calls (a tree tested once is not tested again)."""
        if self.limit is not None:
            return [
                {"source": "verifier", "kind": "diff", "files": None, "empty": None, "error": self.limit, "limit": True}
            ]
        return verify(
            self.task,
            None,
            FinishedRun(self.template, self.scratch / "tree", self.commit, tool_events or (), gateway_events),
            options=VerifyOptions(guard=self.guard, git_dir=False, cache=cache, run_id="gate"),
        )

    def report(self, events: list[dict], transcript: bool) -> dict:
        """The report ``--json`` prints for ``events``; a review without the transcript is ``UNKNOWN``."""
        outcome = classify_outcome(events)
        unknown = None
        if self.review and not transcript:
            # Decided before the review is weighed (a subverted run, no diff, scope, an empty
            # diff): known without the transcript. Anything later: the review could decide it.
            blank = [{**e, "applicable": False} if e.get("kind") == "review" else e for e in events]
            before = classify_outcome(blank)
            diff = next((e for e in events if e.get("kind") == "diff"), {})
            if not (
                before in ("TESTS_SUBVERTED", "UNKNOWN", "SCOPE_VIOLATION")
                or (diff.get("expected") == "required" and diff.get("empty"))
            ):
                unknown = "a review's outcome needs the agent's transcript (the files opened, the verdict given)"
                outcome = "UNKNOWN"
        failures = failed_checks(events if unknown is None else blank, outcome)
        if unknown is not None:
            failures = [f for f in failures if not f.startswith("outcome ")] + [f"review: {unknown}"]
        return {
            "verdict": "PASSED" if outcome == "PASS" else "FAILED",
            "outcome": outcome,
            "repository": str(self.repo),
            "base": self.commit,
            "guard": self.guard.enabled,
            "failures": failures,
            "unknown": unknown,
            "not_weighed": self.not_weighed,
            "events": events,
        }


def run_verify(
    repo: Path, expectation: Path, base: str | None, python: str | None, guard_mode: str, ignore: Sequence[str] = ()
) -> dict:
    """The verification of ``repo`` against ``expectation``: the report ``--json`` prints."""
    with Gate(repo, expectation, base, python, guard_mode, ignore) as gate:
        return gate.report(gate.events(), transcript=False)


def cmd_verify(args) -> int:
    if args.guard not in ("auto", "on", "off"):
        raise BadInput(f"--guard {args.guard}: one of auto, on, off")
    report = run_verify(args.repo, args.expectation, args.base, args.python, args.guard, args.ignore or [])
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
    vp.add_argument(
        "--ignore",
        action="append",
        metavar="GLOB",
        help="leave untracked paths matching GLOB out of the tree weighed (repeatable; ** spans folders); "
        "the files git ignores (.gitignore, .git/info/exclude) are left out already",
    )
    vp.add_argument("--json", action="store_true", help="print the whole report as JSON")
