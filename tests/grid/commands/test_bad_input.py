"""Every bad input gets one line, a non-zero exit and nothing half-written.

Each case runs the command line's own entry point (``claimgrid.commands.cli.main(argv)``, what
``grid.py`` calls) in this process, on a temporary copy of the project's data (its tasks,
conditions and a ``venvs.toml`` whose only framework is the stdlib ``fake`` adapter,
tests/fixtures/frameworks/fake), passed as ``--tasks-dir``/``--conditions-dir``/``--venvs``
(their defaults are the checkout's own: claimgrid/commands/options.py). Each asserts: the exit
code (2 for usage and data errors), stderr is exactly one line naming the flag or the file and
field, no traceback, nothing left in the temporary folder, and nothing new under ``--out`` (a
resumed or reclassified folder is byte-for-byte unchanged). A few cases run the real
``python grid.py`` in a full copy of the project, for what only a process shows: its exit
status, Ctrl-C (SIGINT), a full disk and a closed pipe.
Names of tasks, conditions and models are read from the data, never spelled here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from claimgrid.commands import validate as V
from claimgrid.inputs.conditions import PLACEHOLDERS, load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference.registry import default_models

from tests.conftest import ROOT

FAKE = ROOT / "tests" / "fixtures" / "frameworks" / "fake"
COPIED = ["claimgrid", "grid.py", "tasks", "conditions", "frameworks/_harness", "pyproject.toml"]
TASKS = list(in_suite(load_tasks(), "default"))  # stdlib tasks: no task environment to build
CONTENT = list(load_content_conditions())
SWAP = list(load_swap_conditions())
MODELS = default_models()
SMALL = ["--tasks", TASKS[0], "--content", CONTENT[0], "--swap", SWAP[0], "--models", MODELS[0]]


def _make_data(dest: Path) -> Path:
    """A copy of the project's data (tasks, conditions) and a venvs.toml whose only framework
    is the fake adapter: what ``main()`` in this process reads through the data flags."""
    for rel in ("tasks", "conditions"):
        shutil.copytree(ROOT / rel, dest / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".venv"))
    _add_fake(dest)
    return dest


def _add_fake(dest: Path) -> None:
    fake = dest / "frameworks" / "fake"
    fake.mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock"):  # an empty locked environment: nothing to install
        shutil.copy2(ROOT / "frameworks" / "plain" / name, fake / name)
    shutil.copy2(FAKE / "adapter.py", fake / "adapter.py")
    (dest / "venvs.toml").write_text(
        '[frameworks.fake]\npython = "3.11"\nproject = "frameworks/fake"\nadapter = "frameworks/fake/adapter.py"\n'
    )


def _make_project(dest: Path) -> Path:
    """A runnable copy of the project whose only framework is the fake adapter (the cases
    that run ``python grid.py`` itself).

    claimgrid's bytecode is copied with it (copy2 keeps the sources' mtimes, which each ``.pyc``
    is checked against): every ``grid.py`` here runs with PYTHONDONTWRITEBYTECODE, and without
    it each one compiled the whole package from source again (~0.35 CPU-s a command)."""
    for rel in COPIED:
        src = ROOT / rel
        ignore = (
            shutil.ignore_patterns("*.pyc.*") if rel == "claimgrid" else shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        (shutil.copytree(src, dest / rel, ignore=ignore) if src.is_dir() else shutil.copy2(src, dest / rel))
    _add_fake(dest)
    return dest


def private_tmp() -> dict:
    """An environment whose TMPDIR is a fresh folder, so a test can see what a run left there."""
    tmp = Path(tempfile.mkdtemp(prefix="claimgrid-test-tmpdir-"))
    # The copied project's own modules would gain a __pycache__ on import: Python's cache, not
    # something grid.py wrote (the "nothing written" snapshots cover the project too). Cached
    # bytecode is still read: the shared venv's, and the project's own, copied with it.
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}


def assert_no_leftovers(env: dict) -> None:
    # uv keeps a lock file per environment in TMPDIR by design (`uv-<hash>.lock`): uv's, not ours.
    left = sorted(p.name for p in Path(env["TMPDIR"]).iterdir() if not re.fullmatch(r"uv-[0-9a-f]+\.lock", p.name))
    shutil.rmtree(env["TMPDIR"])
    assert left == [], f"temporary files left behind: {left}"


def grid_process(project: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python grid.py ARGS`` in ``project``; asserts that it left nothing in its TMPDIR."""
    env = private_tmp()
    proc = subprocess.run(
        [sys.executable, str(project / "grid.py"), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert_no_leftovers(env)
    return proc


# The data flags (claimgrid/commands/options.py: each defaults to the checkout's own) that each
# command these cases run takes, pointed into the copied project.
DATA_FLAGS = {"--tasks-dir": "tasks", "--conditions-dir": "conditions", "--venvs": "venvs.toml"}
FLAGS_OF = {
    "run": set(DATA_FLAGS),
    "list": set(DATA_FLAGS),
    "venvs": {"--venvs", "--tasks-dir"},
    "reclassify": {"--tasks-dir", "--conditions-dir"},
}


def grid(project: Path, *args: str) -> subprocess.CompletedProcess:
    """``grid.py ARGS`` through ``cli.main`` in this process, in ``project`` (the working
    folder) with its data flags first (a case's own flag, later, wins), stdout and stderr
    captured and a private temporary folder, which must be empty afterwards. A usage error
    (argparse's exit) is returned as its status, as the process would exit with it."""
    from claimgrid.commands.cli import main

    command = args[0] if args else "run"
    known = FLAGS_OF.get(command, set())
    data = [x for flag, rel in DATA_FLAGS.items() if flag in known for x in (flag, str(project / rel))]
    argv = [command, *data, *args[1:]] if args else data
    tmp = Path(tempfile.mkdtemp(prefix="claimgrid-test-tmpdir-"))
    out, err = io.StringIO(), io.StringIO()
    saved = (os.getcwd(), os.environ.get("TMPDIR"), tempfile.tempdir)
    try:
        os.chdir(project)
        os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(saved[0])
        os.environ["TMPDIR"], tempfile.tempdir = saved[1] or "", saved[2]
        if saved[1] is None:
            del os.environ["TMPDIR"]
    assert_no_leftovers({"TMPDIR": str(tmp)})
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def snapshot(folder: Path) -> dict:
    """Every path under ``folder`` with a hash of its bytes: 'nothing changed' is equality."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


def assert_one_line(proc, code: int, *names: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


# ---------------------------------------------------------------- data-file edits


def _task_toml(p: Path) -> Path:
    return p / "tasks" / TASKS[0] / "task.toml"


def _set_expectation(path: Path, key: str, value: str) -> None:
    lines = [ln for ln in path.read_text().splitlines() if not re.match(rf"{key}\s*=", ln)]
    at = lines.index("[expectation]") + 1
    path.write_text("\n".join(lines[:at] + [f"{key} = {value}"] + lines[at:]) + "\n")


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_text().encode("utf-8") + "\n# caf\u00e9\n".encode("latin-1"))


def _slot(p: Path) -> Path:
    spec = tomllib.loads(_task_toml(p).read_text())
    return p / "tasks" / TASKS[0] / "repo" / spec["content_slot"]


def _content_toml(p: Path) -> Path:
    return p / "conditions" / "content" / f"{CONTENT[0]}.toml"


def _swap_toml(p: Path) -> Path:
    return p / "conditions" / "swap" / f"{SWAP[0]}.toml"


def _replace_line(path: Path, key: str, line: str) -> None:
    path.write_text(re.sub(rf"(?m)^{key}\s*=.*$", line, path.read_text(), count=1))


# (id, edit(project), file(project) that the line must name, field, command)
DATA_CASES = [
    ("task-not-utf8", lambda p: _not_utf8(_task_toml(p)), _task_toml, "UTF-8", "list"),
    ("task-not-utf8-run", lambda p: _not_utf8(_task_toml(p)), _task_toml, "UTF-8", "run"),
    ("slot-not-utf8", lambda p: _slot(p).write_bytes(b"caf\xe9 \xff\n"), _slot, "content_slot", "run"),
    ("slot-not-utf8-list", lambda p: _slot(p).write_bytes(b"caf\xe9 \xff\n"), _slot, "content_slot", "list"),
    (
        "template-unknown-placeholder",
        lambda p: _replace_line(_content_toml(p), "template", 'template = "{task_text} {unknown_thing}"'),
        _content_toml,
        "field 'template'",
        "run",
    ),
    (
        "must-exist-absolute",
        lambda p: _set_expectation(_task_toml(p), "must_exist", '["/etc/passwd"]'),
        _task_toml,
        "expectation.must_exist",
        "run",
    ),
    (
        "must-exist-dotdot",
        lambda p: _set_expectation(_task_toml(p), "must_exist", '["../../etc/passwd"]'),
        _task_toml,
        "expectation.must_exist",
        "run",
    ),
    (
        "allowed-paths-absolute",
        lambda p: _set_expectation(_task_toml(p), "allowed_paths", '["/tmp/**"]'),
        _task_toml,
        "expectation.allowed_paths",
        "run",
    ),
    (
        "test-timeout-negative",
        lambda p: _set_expectation(_task_toml(p), "test_timeout_s", "-5"),
        _task_toml,
        "expectation.test_timeout_s",
        "run",
    ),
    (
        "test-timeout-inf",
        lambda p: _set_expectation(_task_toml(p), "test_timeout_s", "inf"),
        _task_toml,
        "expectation.test_timeout_s",
        "run",
    ),
    (
        "content-slot-absolute",
        lambda p: _replace_line(_task_toml(p), "content_slot", 'content_slot = "/etc/passwd"'),
        _task_toml,
        "content_slot",
        "run",
    ),
    # cases handled before this table existed, kept here so the whole table stays in one place
    (
        "task-unknown-role",
        lambda p: _replace_line(_task_toml(p), "role", 'role = "architect"'),
        _task_toml,
        "field 'role'",
        "run",
    ),
    (
        "task-unknown-field",
        lambda p: _set_expectation(_task_toml(p), "colour", '"red"'),
        _task_toml,
        "expectation.colour",
        "list",
    ),
    ("task-bad-toml", lambda p: _task_toml(p).write_text("id = \n"), _task_toml, "not valid TOML", "run"),
    (
        "swap-bad-value",
        lambda p: _replace_line(_swap_toml(p), "on_unavailable", 'on_unavailable = "explode"'),
        _swap_toml,
        "field 'on_unavailable'",
        "run",
    ),
    ("condition-not-utf8", lambda p: _not_utf8(_content_toml(p)), _content_toml, "UTF-8", "list"),
    (
        "venvs-missing-adapter",
        lambda p: (p / "venvs.toml").write_text((p / "venvs.toml").read_text().replace("adapter.py", "nope.py")),
        lambda p: p / "venvs.toml",
        "frameworks.fake.adapter",
        "run",
    ),
    (
        "venvs-env-placeholder",
        lambda p: (p / "venvs.toml").write_text(
            (p / "venvs.toml").read_text() + 'env = { FAKE_DIR = "{home}/fake" }\n'
        ),
        lambda p: p / "venvs.toml",
        "frameworks.fake.env.FAKE_DIR",
        "run",
    ),
]


@pytest.fixture
def project(tmp_path):
    return _make_data(tmp_path / "project")


@pytest.fixture(scope="module")
def full_project(tmp_path_factory):
    """A runnable copy of the whole project (``python grid.py``), shared by the process cases
    that change no data file."""
    return _make_project(tmp_path_factory.mktemp("full") / "project")


@pytest.mark.parametrize("case", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_a_bad_data_file_is_one_line_naming_file_and_field(project, tmp_path, case):
    _, edit, file_of, field, command = case
    edit(project)
    out = tmp_path / "out"
    args = ["list"] if command == "list" else ["run", "--out", str(out), *SMALL]
    proc = grid(project, *args)
    assert_one_line(proc, 2, str(file_of(project)), field)
    assert not out.exists()


# What only the process shows, for each way a bad input ends: argparse's own exit (a flag), a
# data error raised to main (exit status through grid.py's sys.exit), an unknown command.
PROCESS_CASES = [
    ("flag", lambda p: None, ["run", "--jobs", "-1"], lambda p: "--jobs"),
    ("data-file", lambda p: _not_utf8(_task_toml(p)), ["run", *SMALL], lambda p: str(_task_toml(p))),
    ("command", lambda p: None, ["explode"], lambda p: "explode"),
]


@pytest.mark.parametrize("case", PROCESS_CASES, ids=[c[0] for c in PROCESS_CASES])
def test_the_process_exits_2_with_one_line_and_writes_nothing(tmp_path, case):
    _, edit, args, name = case
    project = _make_project(tmp_path / "project")
    edit(project)
    out = tmp_path / "out"
    before = snapshot(project)
    extra = ["--out", str(out)] if args[0] == "run" else []
    proc = grid_process(project, *args, *extra)
    assert_one_line(proc, 2, name(project))
    assert not out.exists()
    assert snapshot(project) == before


def test_an_unknown_placeholder_line_lists_the_allowed_ones(project):
    _replace_line(_content_toml(project), "template", 'template = "{task_text} {unknown_thing}"')
    line = assert_one_line(grid(project, "list"), 2, "{unknown_thing}")
    assert all("{" + name + "}" in line for name in PLACEHOLDERS)


# ---------------------------------------------------------------- flags


def _prepare_out(kind: str, tmp_path: Path) -> Path:
    if kind == "file":
        (tmp_path / "taken").write_text("x")
        return tmp_path / "taken"
    if kind == "folder":
        (tmp_path / "taken").mkdir()
        return tmp_path / "taken"
    if kind == "under-a-file":
        (tmp_path / "plain-file").write_text("x")
        return tmp_path / "plain-file" / "out"
    raise AssertionError(kind)


# (id, extra args, the flag the line must name)
FLAG_CASES = [
    ("jobs-negative", ["--jobs", "-1"], "--jobs"),
    ("jobs-zero", ["--jobs", "0"], "--jobs"),
    ("jobs-not-a-number", ["--jobs", "two"], "--jobs"),
    ("jobs-too-many", ["--jobs", str(V.MAX_JOBS + 1)], "--jobs"),
    ("timeout-zero", ["--timeout", "0"], "--timeout"),
    ("timeout-negative", ["--timeout", "-5"], "--timeout"),
    ("timeout-nan", ["--timeout", "nan"], "--timeout"),
    ("timeout-inf", ["--timeout", "inf"], "--timeout"),
    ("timeout-too-long", ["--timeout", str(V.MAX_TIMEOUT_S * 2)], "--timeout"),
    ("max-model-calls-zero", ["--max-model-calls", "0"], "--max-model-calls"),
    ("max-model-calls-negative", ["--max-model-calls", "-1"], "--max-model-calls"),
    ("repeats-huge", ["--repeats", "1000000000"], "--repeats"),
    ("repeats-zero", ["--repeats", "0"], "--repeats"),
    ("grid-too-big", ["--repeats", str(V.MAX_REPEATS)], "--repeats"),  # full default selection x 1000
    ("models-twice", ["--models", f"{MODELS[0]},{MODELS[0]}"], "--models"),
    ("content-twice", ["--content", f"{CONTENT[0]},{CONTENT[0]}"], "--content"),
    ("frameworks-empty", ["--frameworks", ",,,"], "--frameworks"),
    ("tasks-empty-entry", ["--tasks", f"{TASKS[0]},,"], "--tasks"),
    ("substitute-empty", ["--substitute="], "--substitute"),
    ("isolation-unknown", ["--isolation", "lukewarm"], "--isolation"),
    ("unknown-flag", ["--colour", "red"], "--colour"),
    ("unknown-task", ["--tasks", "no-such-task"], "no-such-task"),
    ("tasks-dir-missing", ["--tasks-dir", "no/such/dir"], "--tasks-dir"),
    ("venvs-missing", ["--venvs", "no-such.toml"], "--venvs"),
]


@pytest.mark.parametrize("case", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_a_bad_flag_is_one_line_naming_the_flag(project, tmp_path, case):
    _, extra, flag = case
    out = tmp_path / "out"
    proc = grid(project, "run", "--out", str(out), *extra)
    line = assert_one_line(proc, 2, flag)
    assert (
        "allowed" in line
        or "valid" in line
        or "unrecognized" in line
        or "no such" in line
        or "choose from" in line
        or "twice" in line
        or "names nothing" in line
        or "empty" in line
    ), line
    assert not out.exists()


@pytest.mark.parametrize(
    "args, name",
    [
        (["venvs", "--frameworks", "fake,fake"], "--frameworks"),
        (["venvs", "--venvs", "no-such.toml"], "--venvs"),
        (["list", "--tasks-dir", "no/such/dir"], "--tasks-dir"),
        (["list", "--conditions-dir", "grid.py"], "--conditions-dir"),
        (["reclassify"], "dir"),
        (["explode"], "explode"),
        (["gateway", "--port", "x"], "--port"),
    ],
    ids=lambda a: "-".join(a) if isinstance(a, list) else None,
)
def test_other_commands_reject_bad_flags_in_one_line(project, args, name):
    assert_one_line(grid(project, *args), 2, name)


def test_the_grid_size_bound_is_checked_before_planning(project, tmp_path):
    # Within each flag's own range, but the product is too big: refused at once, not a MemoryError.
    proc = grid(project, "run", "--out", str(tmp_path / "out"), "--repeats", str(V.MAX_REPEATS))
    line = assert_one_line(proc, 2, "--repeats", f"{V.MAX_GRID:,}")
    assert re.search(r"would have [\d,]+ runs", line)


@pytest.mark.parametrize("kind", ["file", "folder", "under-a-file"])
def test_out_must_be_a_new_folder(project, tmp_path, kind):
    out = _prepare_out(kind, tmp_path)
    before = snapshot(tmp_path)
    proc = grid(project, "run", "--out", str(out), *SMALL)
    assert_one_line(proc, 2, "--out", str(out))
    assert snapshot(tmp_path) == before


@pytest.fixture
def mountpoint(tmp_path):
    """A folder to mount a small tmpfs on; unmounted in teardown. Skips where mounting is impossible."""
    point = tmp_path / "mnt"
    point.mkdir()
    mounted = []

    def mount(options: str) -> Path:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (not root or no CAP_SYS_ADMIN): {proc.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for p in mounted:
        subprocess.run(["umount", "-l", str(p)], check=False)


def test_out_in_a_read_only_place(project, tmp_path, mountpoint):
    ro = mountpoint("ro,size=1m")
    proc = grid(project, "run", "--out", str(ro / "grid"), *SMALL)
    assert_one_line(proc, 2, "--out", str(ro / "grid"), "writable")
    assert list(ro.iterdir()) == []


# ---------------------------------------------------------------- a real (fake-adapter) grid


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A project copy (runnable as ``python grid.py``) and one finished two-cell grid, run
    once for the store cases."""
    root = tmp_path_factory.mktemp("base")
    project = _make_project(root / "project")
    ledger = root / "ledger"
    proc = grid(
        project,
        "run",
        "--out",
        str(ledger),
        "--jobs",
        "1",
        "--no-progress",
        "--tasks",
        TASKS[0],
        "--content",
        ",".join(CONTENT[:2]),
        "--swap",
        SWAP[0],
        "--models",
        MODELS[0],
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return project, ledger


@pytest.fixture
def ledger(base, tmp_path):
    """A private copy of the base grid's ledger folder (evidence files are read-only: copy keeps modes)."""
    dest = tmp_path / "ledger"
    shutil.copytree(base[1], dest)
    return dest


def _meta(ledger: Path) -> dict:
    return json.loads((ledger / "meta.json").read_text())


STORE_CASES = [
    # (id, edit(ledger), extra args, names that the line must hold)
    ("meta-empty", lambda d: (d / "meta.json").write_text(""), [], ["meta.json", "empty"]),
    ("meta-corrupt", lambda d: (d / "meta.json").write_text('{"grid_id": '), [], ["meta.json", "JSON"]),
    ("meta-not-object", lambda d: (d / "meta.json").write_text("[1, 2]"), [], ["meta.json", "object"]),
    ("meta-missing", lambda d: (d / "meta.json").unlink(), [], ["meta.json", "missing"]),
    (
        "meta-no-selection",
        lambda d: (d / "meta.json").write_text(json.dumps({k: v for k, v in _meta(d).items() if k != "selection"})),
        [],
        ["meta.json", "selection"],
    ),
    (
        "meta-bad-timeout",
        lambda d: (d / "meta.json").write_text(json.dumps({**_meta(d), "timeout_s": -1})),
        [],
        ["meta.json", "timeout_s"],
    ),
    (
        "runs-corrupt-line",
        lambda d: (d / "runs.jsonl").write_text("{oops\n" + (d / "runs.jsonl").read_text()),
        [],
        ["runs.jsonl:1", "JSON"],
    ),
    ("evidence-deleted", lambda d: shutil.rmtree(sorted((d / "runs").iterdir())[0]), [], ["events.jsonl", "missing"]),
    ("resume-other-models", None, ["--models", MODELS[-1]], ["--models", "differs"]),
    ("resume-other-content", None, ["--content", CONTENT[-1]], ["--content", "differs"]),
    ("resume-other-repeats", None, ["--repeats", "2"], ["--repeats", "differs"]),
    ("resume-other-timeout", None, ["--timeout", "7"], ["--timeout", "differs"]),
    ("resume-other-isolation", None, ["--isolation", "fresh"], ["--isolation", "differs"]),
    ("resume-other-out", None, ["--out", "/tmp/elsewhere"], ["--out"]),
]


@pytest.mark.parametrize("case", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_resume_checks_the_stored_grid_and_refuses_other_selections(base, ledger, case):
    _, edit, extra, names = case
    if edit:
        edit(ledger)
    before = snapshot(ledger)
    proc = grid(base[0], "run", "--resume", str(ledger), *extra)
    assert_one_line(proc, 2, *names)
    assert snapshot(ledger) == before


def test_resume_with_the_stored_selection_is_accepted(base, ledger):
    sel = _meta(ledger)["selection"]
    proc = grid(
        base[0],
        "run",
        "--resume",
        str(ledger),
        "--no-progress",
        "--models",
        ",".join(sel["models"]),
        "--content",
        ",".join(reversed(sel["content"])),
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{len(sel['content'])} already done, 0 to run" in proc.stdout


def test_resume_of_a_folder_that_does_not_exist(base, tmp_path):
    proc = grid(base[0], "run", "--resume", str(tmp_path / "nope"))
    assert_one_line(proc, 2, "--resume", "no such folder")
    assert not (tmp_path / "nope").exists()


def test_reclassify_with_a_deleted_evidence_folder(base, ledger):
    victim = sorted((ledger / "runs").iterdir())[0]
    shutil.rmtree(victim)
    before = snapshot(ledger)
    proc = grid(base[0], "reclassify", str(ledger))
    assert_one_line(proc, 2, str(victim / "events.jsonl"), victim.name)
    assert snapshot(ledger) == before


def test_reclassify_of_a_folder_that_is_not_a_grid(base, tmp_path):
    proc = grid(base[0], "reclassify", str(tmp_path))
    assert_one_line(proc, 2, str(tmp_path), "runs.jsonl")


def _records(out: Path) -> list[dict]:
    path = out / "runs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip().endswith("}")] if path.exists() else []


# A read-only remount mid-grid is not a case: the store holds its writer lock open for
# writing, so the kernel refuses the remount (EBUSY) until the grid has exited.
@pytest.mark.parametrize("failure", ["disk-full", "interrupted"])
def test_a_grid_stopped_by_storage_or_ctrl_c_is_one_line_and_resume_completes_it(base, mountpoint, failure):
    """A real ENOSPC on a small tmpfs (filled until a run or two still fits), or Ctrl-C (SIGINT
    once the first run is recorded). Then space is freed, and --resume completes the grid."""
    project = base[0]
    cells = [
        "--tasks",
        ",".join(TASKS[:3]),
        "--content",
        ",".join(CONTENT[:2]),
        "--swap",
        SWAP[0],
        "--models",
        MODELS[0],
    ]
    n_cells = min(3, len(TASKS)) * min(2, len(CONTENT))
    args = [sys.executable, str(project / "grid.py"), "run", "--jobs", "1", "--no-progress", *cells]
    if failure == "disk-full":
        disk = mountpoint("size=4m")
        filler = disk / "filler"
        st = os.statvfs(disk)
        # leave meta.json (~190 KiB with its classification tables) and
        # a run or two, not six
        with open(filler, "wb") as fh:
            fh.write(b"\0" * (st.f_bavail * st.f_frsize - 300 * 1024))
        out = disk / "grid"
        proc = grid_process(project, *args[2:], "--out", str(out))
        line = assert_one_line(proc, 1, "--out", str(out), "No space left on device", "--resume")
        filler.unlink()
    elif failure == "interrupted":
        out = base[1].parent / "interrupted"
        env = private_tmp()
        run = subprocess.Popen(
            [*args, "--out", str(out)], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + 300
        while not _records(out) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert run.poll() is None, "the grid finished before it could be interrupted"
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=300)
        assert_no_leftovers(env)
        line = assert_one_line(
            subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr),
            130,
            "interrupted",
            str(out),
            "--resume",
        )
    assert 1 <= len(_records(out)) < n_cells, line

    resumed = grid(project, "run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    runs = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines() if x.strip()]
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids)) == n_cells
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(ids)
    from claimgrid.store import RunStore

    assert all(RunStore(out).verify_manifest(i) == [] for i in ids)
    assert (out / "LEDGER.md").is_file()


# ---------------------------------------------------------------- output


def test_output_to_a_closed_pipe_ends_quietly(full_project):
    project = full_project
    proc = subprocess.Popen(
        [sys.executable, str(project / "grid.py"), "list"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader is gone before the first line is written (`| head` that left)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_list_aligns_long_ids(project):
    long_id = "a-task-with-an-id-much-longer-than-sixteen-characters"
    src, dest = project / "tasks" / TASKS[0], project / "tasks" / long_id
    shutil.copytree(src, dest)
    _replace_line(dest / "task.toml", "id", f'id = "{long_id}"')
    proc = grid(project, "list")
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.split("content conditions")[0].splitlines()[1:]
    assert len(rows) == len(load_tasks(project / "tasks"))
    role_at = {row.index(role) for row in rows for role in ("builder", "reviewer", "reporter") if f" {role} " in row}
    assert len(role_at) == 1, rows  # every role starts in the same column
    names_at = {len(row) - len(row.lstrip()) for row in rows}
    assert names_at == {2}
    for row in rows:  # a name is never glued to its role
        assert re.match(r"  \S+ +\S+ ", row), row
