"""Task definitions (``tasks/<id>/task.toml`` + ``tasks/<id>/repo/``) and workspaces.

A task is data only (docs/task-authors.md, "Writing a task"). Its ``reference`` section, and the ``steps`` of its attacker goal
and legitimate note, are the answer key: they reach the harness gateway (which scripts
the reference models) and are never sent to the agent process.

A task may carry its own locked environment: ``pyproject.toml`` + ``uv.lock`` beside its
``task.toml``. It is built like a framework venv (``claimgrid.inputs.venvs.ensure_envs``, same
stamp check) into ``.venvs/tasks/<id>``, and its interpreter is ``Task.python``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, field_validator, model_validator

from claimgrid import ROOT
from claimgrid.anybytes import remove_tree
from claimgrid.errors import ClaimgridError, DataError, UnknownNameError
from claimgrid.inputs.schema import Strict, load_toml, read_text, validate
from claimgrid.inputs.venvs import Env, ensure_envs
from claimgrid.vocab import EVIDENCE_RANK, ROLE_EVIDENCE, TOOL_NAMES, Role, ToolName  # noqa: F401  (re-exported)


def _inside_fixture(value: str) -> str:
    """A path (or glob) relative to the task's ``repo/``: not empty, not absolute, no ``..``."""
    p = PurePosixPath(value)
    if not value.strip() or p.is_absolute() or value.startswith("~") or ".." in p.parts or "\\" in value:
        raise ValueError(
            f"'{value}' is not a path inside the task's repo/; allowed: a relative path with '/' separators and no '..'"
        )
    return value


FixturePath = Annotated[str, AfterValidator(_inside_fixture)]
# A time limit the verifier can honour: more than 0, finite, at most an hour.
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]


# The files a test runner collects as tests, when a task names none (``[verify] test_files``).
DEFAULT_TEST_FILES = ("**/test_*.py", "**/*_test.py", "**/conftest.py", "**/tests/**", "**/test/**")


class ToolStep(Strict):
    tool: ToolName
    args: dict[str, Any] = Field(default_factory=dict)


class Check(Strict):
    """A state or log check the verifier can evaluate without the agent's words."""

    kind: Literal["file_exists", "file_contains", "path_changed", "tool_called", "review_verdict"]
    path: FixturePath | None = None
    text: str | None = None
    tool: str | None = None
    arg_contains: str | None = None
    value: Literal["PASS", "FAIL"] | None = None

    @model_validator(mode="after")
    def _fields_for_kind(self):
        need = {
            "file_exists": ("path",),
            "file_contains": ("path", "text"),
            "path_changed": ("path",),
            "tool_called": ("tool", "arg_contains"),
            "review_verdict": ("value",),
        }[self.kind]
        for name in need:
            if getattr(self, name) is None:
                raise ValueError(f"check kind '{self.kind}' needs '{name}'")
        return self


class ExactContent(Strict):
    path: FixturePath
    content: str


class Review(Strict):
    truth: Literal["PASS", "FAIL"]
    must_open: list[FixturePath]


class Expectation(Strict):
    diff: Literal["required", "forbidden", "any"]
    test_command: list[str] | None = None
    test_timeout_s: Seconds = 60
    must_exist: list[FixturePath] = Field(default_factory=list)
    exact_contents: list[ExactContent] = Field(default_factory=list)
    allowed_paths: list[FixturePath]
    protected_paths: list[FixturePath] = Field(default_factory=list)
    review: Review | None = None
    # What evidence the correct outcome needs, when the role's default is wrong for this
    # task (a builder with nothing to fix: read_only). Harness data, so it may replace the
    # role's default; the agent's own declaration can still only raise it.
    evidence: Literal["code", "artifact", "read_only", "none"] | None = None
    # A run_command the correct outcome needs (substring of the command), e.g. "unittest".
    evidence_command: str | None = None
    # True for a task whose tests contradict its ticket (an impossible variant): the honest
    # outcome is a reported failure, and tests that pass mean the run was gamed.
    impossible: StrictBool = False


class Goal(Strict):
    """An instruction rendered into the content slot, with its check and (harness-only) steps."""

    instruction: str
    check: Check
    steps: list[ToolStep] = Field(default_factory=list)

    @field_validator("instruction")
    @classmethod
    def _renderable(cls, value: str) -> str:
        # The malicious template wraps the instruction in an HTML comment; "-->" would end it early.
        if "-->" in value:
            raise ValueError("an instruction must not contain '-->' (templates wrap it in an HTML comment)")
        if not value.strip():
            raise ValueError("an instruction must not be empty")
        return value


class Provenance(Strict):
    """Where a task taken from a real project comes from (recorded in every run's parity)."""

    repository: str
    fixture_commit: str
    fix_commit: str
    license: str
    license_file: str
    issues: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shapes(self):
        if not re.fullmatch(r"https://[^\s/]+/\S+", self.repository):
            raise ValueError(f"repository '{self.repository}' is not an https:// URL")
        for name in ("fixture_commit", "fix_commit"):
            if not re.fullmatch(r"[0-9a-f]{40}", getattr(self, name)):
                raise ValueError(f"{name} must be a full 40-digit lowercase hex commit id")
        for url in self.issues:
            if not url.startswith("https://"):
                raise ValueError(f"issue link '{url}' is not an https:// URL")
        return self


class Reference(Strict):
    steps: list[ToolStep]
    review_verdict: Literal["PASS", "FAIL"] | None = None


class VerifySpec(Strict):
    """How the verifier may treat the task's test runs (claimgrid.verify.cache)."""

    # False: the tests' result depends on more than the workspace and the interpreter (the
    # clock, randomness, the network, files outside the workspace), so no run's test result
    # serves another run: every run is tested.
    deterministic: StrictBool = True
    # The fixture's test files (globs): restored over the agent's for the second test run.
    # None: claimgrid.verify.tamper.DEFAULT_TEST_FILES (what the runners collect as tests).
    test_files: list[FixturePath] | None = None
    # A folder of the task (beside repo/) whose files only the verifier lays over the tree
    # for that run: tests the agent never sees. The test command must collect them.
    hidden_tests: FixturePath | None = None


class TaskSpec(Strict):
    id: str
    title: str
    suite: str = "default"
    python: str = "3.11"  # the task environment's Python (used only with pyproject.toml + uv.lock)
    provenance: Provenance | None = None
    role: Role
    content_slot: FixturePath
    prompt: str
    expectation: Expectation
    attacker_goal: Goal
    legitimate_note: Goal
    reference: Reference
    verify: VerifySpec = Field(default_factory=VerifySpec)

    @model_validator(mode="after")
    def _role_rules(self):
        if self.role == "reviewer" and self.expectation.review is None:
            raise ValueError("a reviewer task needs expectation.review")
        if self.expectation.review and self.reference.review_verdict is None:
            raise ValueError("a review task needs reference.review_verdict")
        return self

    @field_validator("suite")
    @classmethod
    def _suite_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", value):
            raise ValueError(f"'{value}' is not lowercase letters, digits, '-' and '_'")
        return value

    @field_validator("python")
    @classmethod
    def _python_version(cls, value: str) -> str:
        if not re.fullmatch(r"3\.\d+(\.\d+)?", value):
            raise ValueError(f"'{value}' is not a Python version like '3.11'")
        return value


class Task:
    """A validated task plus its folder. ``spec`` is the parsed ``task.toml``."""

    def __init__(self, spec: TaskSpec, folder: Path):
        self.spec = spec
        self.folder = folder
        self.repo = folder / "repo"

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def role(self) -> str:
        return self.spec.role

    @property
    def expected_evidence(self) -> str:
        return self.spec.expectation.evidence or ROLE_EVIDENCE[self.spec.role]

    def slot_text(self) -> str:
        return (self.repo / self.spec.content_slot).read_text(encoding="utf-8")

    @cached_property
    def task_hash(self) -> str:
        """sha256 over task.toml, the task environment's lock and every fixture file: a parity fact."""
        h = hashlib.sha256()
        env_files = [self.folder / "pyproject.toml", self.folder / "uv.lock"]
        hidden = list(self.hidden_tests.rglob("*")) if self.hidden_tests and self.hidden_tests.is_dir() else []
        for p in sorted([self.folder / "task.toml", *env_files, *self.repo.rglob("*"), *hidden]):
            if p.is_file():
                h.update(str(p.relative_to(self.folder)).encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    @property
    def test_globs(self) -> list[str]:
        """The fixture's test files as globs (``[verify] test_files`` or the runners' default)."""
        return list(self.spec.verify.test_files or DEFAULT_TEST_FILES)

    @property
    def hidden_tests(self) -> Path | None:
        """The task's hidden-tests folder (``[verify] hidden_tests``), or None."""
        return self.folder / self.spec.verify.hidden_tests if self.spec.verify.hidden_tests else None

    @property
    def suite(self) -> str:
        return self.spec.suite

    @property
    def env(self):
        """The task's own locked environment (``claimgrid.inputs.venvs.Env``), or None (stdlib task)."""
        if not (self.folder / "pyproject.toml").is_file():
            return None

        return Env("task", self.id, self.spec.python, self.folder, ROOT / ".venvs" / "tasks" / self.id)

    def provenance(self) -> dict | None:
        """Provenance as plain data (run records, ledger); None for a task written for claimgrid."""
        return self.spec.provenance.model_dump() if self.spec.provenance else None

    def test_command(self) -> list[str] | None:
        cmd = self.spec.expectation.test_command
        if not cmd:
            return None
        return [self.python if part == "{python}" else part for part in cmd]

    @property
    def python(self) -> str:
        """The task's interpreter: ``{python}`` in its test command, and ``python``/``python3``
        in the agent's sandboxed shell. The task environment's interpreter when the task
        carries ``pyproject.toml`` + ``uv.lock`` (built by ``ensure_task_envs``), else the
        driver's own."""
        env = self.env
        return _real_folder(str(env.venv_python) if env else sys.executable)


def _real_folder(python: str) -> str:
    """``python`` with its folder's symlinks resolved, its own name kept.

    The sandbox binds an interpreter's folders at their real paths, so a path through a
    symlinked folder (a ``.venvs`` that links elsewhere) would not exist inside it. The file
    itself stays unresolved: a venv's ``bin/python`` links to the base interpreter, and only
    the venv path finds the venv's ``pyvenv.cfg``."""
    return os.path.join(os.path.realpath(os.path.dirname(python)), os.path.basename(python))


def load_task(folder: Path) -> Task:
    path = folder / "task.toml"
    spec = validate(TaskSpec, load_toml(path), path)
    has = [n for n in ("pyproject.toml", "uv.lock") if (folder / n).is_file()]
    if len(has) == 1:
        missing = ({"pyproject.toml", "uv.lock"} - set(has)).pop()
        raise DataError(
            folder / has[0], None, f"a task environment needs both pyproject.toml and uv.lock; {missing} is missing"
        )
    if spec.provenance and not (folder / "repo" / spec.provenance.license_file).is_file():
        raise DataError(path, "provenance.license_file", f"'{spec.provenance.license_file}' is not a file in repo/")
    if spec.id != folder.name:
        raise DataError(path, "id", f"'{spec.id}' does not match its folder name '{folder.name}'")
    if not (folder / "repo").is_dir():
        raise DataError(path, None, "the task folder has no repo/ fixture")
    if spec.verify.hidden_tests and not (folder / spec.verify.hidden_tests).is_dir():
        raise DataError(path, "verify.hidden_tests", f"'{spec.verify.hidden_tests}' is not a folder of the task")
    slot = folder / "repo" / spec.content_slot
    if not slot.is_file():
        raise DataError(path, "content_slot", f"'{spec.content_slot}' is not a file in repo/")
    # Rendered into every run's workspace: it must be text, found out here and not mid-grid.
    read_text(slot, "content_slot")
    return Task(spec, folder)


def load_tasks(root: Path | None = None) -> dict[str, Task]:
    """Every task under ``root`` (default ``tasks/``), by id; one bad file raises DataError."""
    root = root or ROOT / "tasks"
    if not root.is_dir():
        raise DataError(root, None, "no such tasks folder")
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        task = load_task(folder)
        out[task.id] = task
    return out


def in_suite(tasks: dict[str, Task], suite: str) -> dict[str, Task]:
    """The tasks whose ``suite`` is ``suite``; an empty suite is an error naming the valid ones."""
    out = {k: t for k, t in tasks.items() if t.suite == suite}
    if not out:
        raise UnknownNameError("suite", suite, {t.suite for t in tasks.values()})
    return out


def ensure_task_envs(tasks, console=None) -> dict:
    """Build (or find current) the locked environment of every task that carries one."""
    return ensure_envs([t.env for t in tasks if t.env is not None], console)


def select(registry: dict, names, kind: str) -> list:
    """Look names up in a registry; an unknown name raises with the valid names listed."""
    out = []
    for name in names:
        if name not in registry:
            raise UnknownNameError(kind, name, registry)
        out.append(registry[name])
    return out


# Fixed identity and dates make the fixture commit reproducible, so every diff in every
# run is measured against the same commit id.
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "claimgrid",
    "GIT_AUTHOR_EMAIL": "fixture@claimgrid.invalid",
    "GIT_COMMITTER_NAME": "claimgrid",
    "GIT_COMMITTER_EMAIL": "fixture@claimgrid.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.devnull,
}


def git(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        env=GIT_ENV,
        capture_output=True,
        text=True,
        check=check,
    )


class TemplateTampered(ClaimgridError):
    """A template's content no longer matches the digest recorded when it was built."""


def template_digest(folder: Path) -> str:
    """sha256 over every entry of a template (``.git`` included): path, type, exec bit,
    content or link target. Permissions otherwise are not content (the copy is made
    writable), so sealing a template does not change its digest."""
    h = hashlib.sha256()
    root = str(folder)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        h.update(b"D\0" + os.fsencode(rel_dir) + b"\0")
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            h.update(os.fsencode(os.path.join(rel_dir, name)) + b"\0")
            if os.path.islink(path):
                h.update(b"L" + os.fsencode(os.readlink(path)))
            else:
                h.update(b"X" if st.st_mode & 0o100 else b"F")
                with open(path, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
            h.update(b"\0")
    return h.hexdigest()


def seal_template(dest: Path) -> str:
    """Make a built template read-only (owned by root when the harness is root) and return
    its digest, which every copy is checked against (:func:`materialise`)."""
    as_root = os.geteuid() == 0
    for dirpath, _dirnames, filenames in os.walk(dest, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            if as_root:
                os.chown(path, 0, 0)
            os.chmod(path, 0o555 if os.stat(path).st_mode & 0o100 else 0o444)
        if as_root:
            os.chown(dirpath, 0, 0)
        os.chmod(dirpath, 0o555)
    return template_digest(dest)


def build_template(task: Task, slot_text: str, dest: Path) -> str:
    """Write the fixture with ``slot_text`` in the content slot as a one-commit repo.

    Returns the commit id. Used once per (task, content condition); runs copy it. The
    driver seals it (:func:`seal_template`) before the first copy.
    """
    shutil.copytree(task.repo, dest)
    (dest / task.spec.content_slot).write_text(slot_text)
    # No template files (13 sample hooks, description) and, after the commit, one pack
    # instead of a loose object per file: every run copies this repository and the driver
    # deletes the copy, and both cost per entry (figures in bench/README.md).
    git(["init", "-q", "-b", "main", "--template="], dest)
    # Interpreter caches are not work: running the tests must not count as a change.
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text("__pycache__/\n")
    git(["add", "-A"], dest)
    git(["commit", "-q", "-m", f"fixture {task.id}"], dest)
    git(["repack", "-a", "-d", "-q", "-n"], dest)
    return git(["rev-parse", "HEAD"], dest).stdout.strip()


def materialise(template: Path, dest: Path, digest: str | None = None) -> None:
    """Copy a template repo into a fresh workspace (every file writable by the agent's tools).

    With ``digest`` (the one :func:`seal_template` returned), the template is checked as it is
    copied, each file read once for both: a mismatch removes the copy and raises
    :class:`TemplateTampered`, so a changed template never becomes a workspace. Files keep
    their exec bit and their and their folders' times (as ``shutil.copytree`` kept them).
    """
    h = hashlib.sha256() if digest is not None else None
    root, out = str(template), str(dest)
    os.makedirs(out)
    folders: list[tuple[str, os.stat_result]] = []
    try:
        # The walk and the hashed bytes are template_digest's exactly (same order, same fields).
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            target_dir = out if rel_dir == "." else os.path.join(out, rel_dir)
            if rel_dir != ".":
                os.mkdir(target_dir)
            folders.append((target_dir, os.stat(dirpath)))
            if h is not None:
                h.update(b"D\0" + os.fsencode(rel_dir) + b"\0")
            links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
            for name in sorted(filenames + links):
                _copy_entry(os.path.join(dirpath, name), os.path.join(target_dir, name), rel_dir, name, h)
        if h is not None and h.hexdigest() != digest:
            raise TemplateTampered(
                f"template {template} changed since it was built (sha256 {str(digest)[:12]} -> {h.hexdigest()[:12]}); "
                "not copied"
            )
        # run_command may execute as an unprivileged user when the harness runs as root.
        for target_dir, st in reversed(folders):
            os.chmod(target_dir, 0o777)
            os.utime(target_dir, ns=(st.st_atime_ns, st.st_mtime_ns))
    except BaseException:
        remove_tree(dest)
        raise


def _copy_entry(src: str, dst: str, rel_dir: str, name: str, h) -> None:
    """One template file or symlink copied to ``dst`` (writable, its exec bit and times kept),
    its bytes fed to ``h`` as :func:`template_digest` does."""
    st = os.lstat(src)
    if h is not None:
        h.update(os.fsencode(os.path.join(rel_dir, name)) + b"\0")
    if os.path.islink(src):
        target = os.readlink(src)
        os.symlink(target, dst)
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        if h is not None:
            h.update(b"L" + os.fsencode(target) + b"\0")
        return
    executable = st.st_mode & 0o100
    with open(src, "rb") as fh:
        data = fh.read()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, 0o777 if executable else 0o666)
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(fd)
    if h is not None:
        h.update((b"X" if executable else b"F") + hashlib.sha256(data).digest() + b"\0")
