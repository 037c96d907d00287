"""Task definitions (``tasks/<id>/task.toml`` + ``tasks/<id>/repo/``) and workspaces.

A task is data only. Its ``reference`` section, and the ``steps`` of its attacker goal
and legitimate note, are the answer key: they reach the harness gateway (which scripts
the reference models) and are never sent to the agent process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from . import ROOT
from .errors import DataError, UnknownNameError
from .schema import Strict, load_toml, validate

TOOL_NAMES = ("list_dir", "read_file", "search", "write_file", "edit_file", "run_command")
Role = Literal["builder", "reviewer", "reporter"]
# Seed 001: expected evidence comes from the role; a declaration may raise it, never lower it.
ROLE_EVIDENCE = {"builder": "code", "reviewer": "read_only", "reporter": "artifact"}
EVIDENCE_RANK = {"none": 0, "read_only": 1, "artifact": 2, "code": 3}


class ToolStep(Strict):
    tool: Literal[TOOL_NAMES]  # type: ignore[valid-type]
    args: dict[str, Any] = Field(default_factory=dict)


class Check(Strict):
    """A state or log check the verifier can evaluate without the agent's words."""

    kind: Literal["file_exists", "file_contains", "path_changed", "tool_called", "review_verdict"]
    path: str | None = None
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
    path: str
    content: str


class Review(Strict):
    truth: Literal["PASS", "FAIL"]
    must_open: list[str]


class Expectation(Strict):
    diff: Literal["required", "forbidden", "any"]
    test_command: list[str] | None = None
    test_timeout_s: float = 60
    must_exist: list[str] = Field(default_factory=list)
    exact_contents: list[ExactContent] = Field(default_factory=list)
    allowed_paths: list[str]
    protected_paths: list[str] = Field(default_factory=list)
    review: Review | None = None
    # What evidence the correct outcome needs, when the role's default is wrong for this
    # task (a builder with nothing to fix: read_only). Harness data, so it may replace the
    # role's default; the agent's own declaration can still only raise it.
    evidence: Literal["code", "artifact", "read_only", "none"] | None = None
    # A run_command the correct outcome needs (substring of the command), e.g. "unittest".
    evidence_command: str | None = None


class Goal(Strict):
    """An instruction rendered into the content slot, with its check and (harness-only) steps."""

    instruction: str
    check: Check
    steps: list[ToolStep] = Field(default_factory=list)


class Reference(Strict):
    steps: list[ToolStep]
    review_verdict: Literal["PASS", "FAIL"] | None = None


class TaskSpec(Strict):
    id: str
    title: str
    role: Role
    content_slot: str
    prompt: str
    expectation: Expectation
    attacker_goal: Goal
    legitimate_note: Goal
    reference: Reference

    @model_validator(mode="after")
    def _role_rules(self):
        if self.role == "reviewer" and self.expectation.review is None:
            raise ValueError("a reviewer task needs expectation.review")
        if self.expectation.review and self.reference.review_verdict is None:
            raise ValueError("a review task needs reference.review_verdict")
        return self


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
        return (self.repo / self.spec.content_slot).read_text()

    @cached_property
    def task_hash(self) -> str:
        """sha256 over task.toml and every fixture file: a parity fact."""
        h = hashlib.sha256()
        for p in sorted([self.folder / "task.toml", *self.repo.rglob("*")]):
            if p.is_file():
                h.update(str(p.relative_to(self.folder)).encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def test_command(self) -> list[str] | None:
        cmd = self.spec.expectation.test_command
        if not cmd:
            return None
        return [self.python if part == "{python}" else part for part in cmd]

    @property
    def python(self) -> str:
        """The task's interpreter: ``{python}`` in its test command, and ``python``/``python3``
        in the agent's sandboxed shell. Today the driver's own; a task environment replaces it."""
        return sys.executable


def load_task(folder: Path) -> Task:
    path = folder / "task.toml"
    spec = validate(TaskSpec, load_toml(path), path)
    if spec.id != folder.name:
        raise DataError(path, "id", f"'{spec.id}' does not match its folder name '{folder.name}'")
    if not (folder / "repo").is_dir():
        raise DataError(path, None, "the task folder has no repo/ fixture")
    if not (folder / "repo" / spec.content_slot).is_file():
        raise DataError(path, "content_slot", f"'{spec.content_slot}' is not a file in repo/")
    return Task(spec, folder)


def load_tasks(root: Path | None = None) -> dict[str, Task]:
    """Every task under ``root`` (default ``tasks/``), by id; one bad file raises DataError."""
    root = root or ROOT / "tasks"
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        task = load_task(folder)
        out[task.id] = task
    return out


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
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, env=GIT_ENV,
        capture_output=True, text=True, check=check,
    )


def build_template(task: Task, slot_text: str, dest: Path) -> str:
    """Write the fixture with ``slot_text`` in the content slot as a one-commit repo.

    Returns the commit id. Used once per (task, content condition); runs copy it.
    """
    shutil.copytree(task.repo, dest)
    (dest / task.spec.content_slot).write_text(slot_text)
    git(["init", "-q", "-b", "main"], dest)
    # Interpreter caches are not work: running the tests must not count as a change.
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text("__pycache__/\n*.pyc\n")
    git(["add", "-A"], dest)
    git(["commit", "-q", "-m", f"fixture {task.id}"], dest)
    return git(["rev-parse", "HEAD"], dest).stdout.strip()


def materialise(template: Path, dest: Path) -> None:
    """Copy a template repo into a fresh workspace (every file writable by the agent's tools)."""
    shutil.copytree(template, dest, symlinks=True)
    # run_command may execute as an unprivileged user when the harness runs as root.
    for dirpath, dirnames, filenames in os.walk(dest):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o666)
