"""The verifier's test cache (claimgrid.verify.cache).

* the key: every input changes it; the workspace part sees one byte, one mode bit (in and
  out of git's tree), a symlink target, an empty folder, the ``.git`` folder; not the
  interpreter caches the test run does not see; a fifo makes a workspace not cacheable;
* the cache: only completed test runs are stored, runs with one key in flight test once,
  the size is bounded;
* through the real pipeline (``grid.py run``, the ``plain`` framework, real sandboxed test
  runs): identical final trees hit and name the run whose test run served them, trees one
  byte / one mode bit / one symlink target apart miss, a task with ``[verify]
  deterministic = false`` never hits, classifications equal a ``--no-verify-cache`` grid,
  and the setting is in meta.json and the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from claimgrid.sandbox.guard import Guard, detect
from claimgrid.store.lines import read_events, read_runs
from claimgrid.verify.cache import VerifyCache, cache_key, cacheable, interpreter_identity, workspace_extras
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, verify, workspace_diff

from tests.conftest import ROOT

POLICIES = ROOT / "tests" / "fixtures" / "vcache_policies.py"


def _view(template, ws, base) -> tuple[str, str]:
    view: dict = {}
    workspace_diff(template, ws, base, None, view)
    return view["tree"], workspace_extras(ws, view["seen"])


KEY = dict(
    command=["python", "-m", "unittest"],
    interpreter={"realpath": "/usr/bin/python3"},
    guard={"guard": "on"},
    timeout_s=60.0,
    env={"vars": {"LANG": "C.UTF-8"}},
    tree="t" * 40,
    extras="e" * 64,
)


# --------------------------------------------------------------------------- the key


def test_every_key_input_changes_the_key():
    base = cache_key(**KEY)
    assert base == cache_key(**dict(KEY))  # a pure function of its inputs
    for name, other in [
        ("command", ["python", "-m", "pytest"]),
        ("interpreter", {"realpath": "/usr/bin/python3.12"}),
        ("guard", {"guard": "off", "reason": "--guard off"}),
        ("timeout_s", 61.0),
        ("env", {"vars": {"LANG": "C"}}),
        ("tree", "u" * 40),
        ("extras", "f" * 64),
    ]:
        assert cache_key(**{**KEY, name: other}) != base, name


def test_workspace_part_of_the_key(workspace):
    template, ws, base = workspace("fix-float-add")
    first = _view(template, ws, base)
    assert all(first) and first == _view(template, ws, base)
    calc = ws / "src" / "calculator.py"

    def changes(mutate, undo) -> tuple[bool, bool]:
        """(tree changed, extras changed) by ``mutate``; ``undo`` restores the workspace."""
        mutate()
        now = _view(template, ws, base)
        undo()
        assert _view(template, ws, base) == first
        return now[0] != first[0], now[1] != first[1]

    data = calc.read_bytes()
    assert changes(lambda: calc.write_bytes(data[:-1] + b" "), lambda: calc.write_bytes(data))[0]
    mode = calc.stat().st_mode
    assert changes(lambda: calc.chmod(mode | 0o100), lambda: calc.chmod(mode))[0]  # exec bit: in git's tree
    # a permission bit git does not record: only the extras see it
    assert changes(lambda: calc.chmod(mode & ~0o002), lambda: calc.chmod(mode)) == (False, True)
    link = ws / "src" / "link"
    os.symlink("a", link)
    with_a = _view(template, ws, base)
    link.unlink()
    os.symlink("b", link)
    assert _view(template, ws, base)[0] != with_a[0]  # a symlink target is in the tree (never followed)
    link.unlink()
    empty = ws / "src" / "empty"
    assert changes(lambda: empty.mkdir(), lambda: empty.rmdir()) == (False, True)  # git has no empty folders
    head = ws / ".git" / "HEAD"
    text = head.read_bytes()
    assert changes(lambda: head.write_bytes(text + b"\n"), lambda: head.write_bytes(text)) == (False, True)
    # interpreter caches: the diff does not record them and the test run sees them empty
    cache = ws / "src" / "__pycache__"
    cache.mkdir()
    with_cache = _view(template, ws, base)
    (cache / "calculator.cpython-311.pyc").write_bytes(b"planted")
    assert _view(template, ws, base) == with_cache
    shutil.rmtree(cache)
    os.mkfifo(ws / "src" / "fifo")
    view: dict = {}
    workspace_diff(template, ws, base, None, view)
    assert workspace_extras(ws, view["seen"]) is None  # not cacheable


def test_interpreter_identity_names_the_environment():
    ident = interpreter_identity(sys.executable)
    assert ident["realpath"] == os.path.realpath(sys.executable)
    assert ident["roots"] and ident["binary"][2] == os.stat(os.path.realpath(sys.executable)).st_size
    if (Path(sys.executable).parent.parent / "pyvenv.cfg").is_file():
        assert len(ident["pyvenv_cfg"]) == 64


# --------------------------------------------------------------------------- the cache


def _tests(**kw) -> dict:
    return {
        "source": "verifier",
        "kind": "tests",
        "command": ["x"],
        "exit_code": 0,
        "passed": True,
        "timed_out": False,
        "guard": True,
        "output_tail": "OK",
        "duration_s": 0.1,
        **kw,
    }


def test_only_completed_test_runs_are_cacheable():
    assert cacheable(_tests()) and cacheable(_tests(exit_code=1, passed=False))
    assert not cacheable(_tests(exit_code=None, passed=None, timed_out=True, reason="ran over"))
    assert not cacheable(_tests(exit_code=None, passed=None, output_tail="could not run the test command"))
    assert not cacheable(_tests(exit_code=-9, passed=False))  # killed by a signal
    assert not cacheable(_tests(exit_code=1, passed=False, output_tail="bwrap: Can't mount proc"))
    assert not cacheable(_tests(exit_code=None, passed=None, reason="not run: cap"))


def test_cache_hit_names_the_run_and_carries_its_result():
    cache = VerifyCache()
    first = cache.run("k", "run-a", lambda: _tests(output_tail="Ran 1 test\nOK", duration_s=0.25))
    assert first["cache"] == "miss" and first["cached"] is False and first["cache_key"] == "k"
    second = cache.run("k", "run-b", lambda: pytest.fail("a hit must not run the tests"))
    assert second["cached"] is True and second["verified_by"] == "run-a"
    assert second["detail"] == "verified by the result of run run-a"
    for field in ("command", "exit_code", "passed", "timed_out", "guard", "output_tail", "duration_s"):
        assert second[field] == first[field], field
    # a timeout is not stored: the next run with that key is tested again
    assert cache.run("t", "run-c", lambda: _tests(exit_code=None, passed=None, timed_out=True))["cache"] == "miss"
    assert cache.run("t", "run-d", lambda: _tests())["cache"] == "miss"


def test_concurrent_runs_with_one_key_test_once_and_the_cache_is_bounded():
    cache = VerifyCache(max_entries=3)
    calls, results = [], {}
    gate = threading.Event()

    def compute():
        calls.append(1)
        gate.wait(5)  # every other thread arrives while this test run is in flight
        return _tests()

    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(f"run-{i}", cache.run("same", f"run-{i}", compute)))
        for i in range(6)
    ]
    for t in threads:
        t.start()
    time.sleep(0.3)
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 6
    origins = [rid for rid, r in results.items() if r["cache"] == "miss"]
    assert len(origins) == 1
    assert {r["verified_by"] for rid, r in results.items() if rid not in origins} == set(origins)
    for i in range(5):
        cache.run(f"k{i}", f"r{i}", _tests)
    assert len(cache._entries) == 3 and "same" not in cache._entries


def test_verify_with_the_cache(workspace, tasks):
    """verify() on real workspaces: identical trees hit, one byte apart miss, opted out never hits."""
    from claimgrid.inputs.tasks import Task

    task = tasks["fix-float-add"]
    guard = detect("auto")
    cache = VerifyCache()
    template, ws, base = workspace("fix-float-add")

    def tests_of(t, run_id):
        options = VerifyOptions(guard=guard, cache=cache, run_id=run_id)
        return next(
            e for e in verify(t, None, FinishedRun(template, ws, base), options=options) if e["kind"] == "tests"
        )

    first = tests_of(task, "a")
    assert first["cache"] == "miss" and first["passed"] is False
    again = tests_of(task, "b")
    assert again["cached"] and again["verified_by"] == "a" and again["passed"] is False
    calc = ws / "src" / "calculator.py"
    calc.write_text(calc.read_text().replace("return int(a) + int(b)", "return a + b"))
    fixed = tests_of(task, "c")
    assert fixed["cache"] == "miss" and fixed["passed"] is True
    spec = task.spec.model_copy(update={"verify": task.spec.verify.model_copy(update={"deterministic": False})})
    opted = Task(spec, task.folder)
    assert tests_of(opted, "d")["cache"] == "opted out" and tests_of(opted, "e")["cache"] == "opted out"
    if guard.enabled:  # a result obtained with the guard off never serves a guarded run
        off = Guard(enabled=False, reason="test")
        options = VerifyOptions(guard=off, cache=cache, run_id="f")
        assert (
            next(
                e for e in verify(task, None, FinishedRun(template, ws, base), options=options) if e["kind"] == "tests"
            )["cache"]
            == "miss"
        )


# --------------------------------------------------------------------------- the real pipeline

MODELS = [
    "diligent",
    "overclaimer",
    "vc-x",
    "vc-x2",
    "vc-y",
    "vc-x-ro",
    "vc-x-exec",
    "vc-link-a",
    "vc-link-a2",
    "vc-link-b",
]


def _grid(*args) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    return proc.returncode, proc.stdout + proc.stderr


def _records(folder: Path) -> dict[str, dict]:
    return {r["run_id"]: r for r in read_runs(folder / "runs.jsonl").values}


def _tests_event(folder: Path, run_id: str) -> dict:
    events = read_events(folder / "runs" / run_id / "events.jsonl")
    return next(e for e in events if e.get("source") == "verifier" and e.get("kind") == "tests")


@pytest.fixture(scope="module")
def grids(tmp_path_factory, plain_venvs):
    """The same grid with and without the cache, over fix-float-add and a copy of it that
    declares its tests non-deterministic."""
    root = tmp_path_factory.mktemp("vcache")
    tasks_dir = root / "tasks"
    shutil.copytree(ROOT / "tasks" / "fix-float-add", tasks_dir / "fix-float-add")
    nd = tasks_dir / "fix-float-add-nd"
    shutil.copytree(ROOT / "tasks" / "fix-float-add", nd)
    toml = (nd / "task.toml").read_text().replace('id = "fix-float-add"', 'id = "fix-float-add-nd"')
    (nd / "task.toml").write_text(toml + "\n[verify]\ndeterministic = false\n")
    common = [
        "run",
        "--venvs",
        str(plain_venvs),
        "--tasks-dir",
        str(tasks_dir),
        "--policies",
        str(POLICIES),
        "--frameworks",
        "plain",
        "--content",
        "clean",
        "--swap",
        "none",
        "--models",
        ",".join(MODELS),
        "--jobs",
        "2",
        "--no-progress",
    ]
    out = {}
    for name, extra in (("on", []), ("off", ["--no-verify-cache"])):
        code, text = _grid(*common, "--out", str(root / name), *extra)
        assert code == 0, text
        out[name] = root / name
    return out


def _rid(task: str, model: str) -> str:
    return f"plain.{task}.clean.none.{model}.sub-reader.r0"


def test_grid_identical_trees_hit_and_name_the_run(grids):
    recs = _records(grids["on"])
    status = {m: recs[_rid("fix-float-add", m)]["verify_cache"] for m in MODELS}
    for a, b in (("diligent", "overclaimer"), ("vc-x", "vc-x2"), ("vc-link-a", "vc-link-a2")):
        pair = sorted([status[a]["status"], status[b]["status"]])
        assert pair == ["hit", "miss"], (a, b, status[a], status[b])
        hit, origin = (a, b) if status[a]["status"] == "hit" else (b, a)
        assert status[hit]["from_run"] == _rid("fix-float-add", origin)
        assert status[hit]["key"] == status[origin]["key"]
        event, first = (
            _tests_event(grids["on"], _rid("fix-float-add", hit)),
            _tests_event(grids["on"], _rid("fix-float-add", origin)),
        )
        assert (
            event["cached"] is True
            and event["detail"] == f"verified by the result of run {_rid('fix-float-add', origin)}"
        )
        for field in ("exit_code", "passed", "output_tail", "duration_s", "command", "guard"):
            assert event[field] == first[field], field
        assert first["cached"] is False
        run_md = (grids["on"] / "runs" / _rid("fix-float-add", hit) / "RUN.md").read_text()
        assert f"verified by the result of run {_rid('fix-float-add', origin)}" in run_md


def test_grid_one_byte_mode_bit_or_link_target_apart_miss(grids):
    recs = _records(grids["on"])
    status = {m: recs[_rid("fix-float-add", m)]["verify_cache"] for m in MODELS}
    for model in ("vc-y", "vc-x-ro", "vc-x-exec", "vc-link-b"):
        assert status[model]["status"] == "miss" and status[model]["from_run"] is None, model
    keys = [status[m]["key"] for m in ("vc-x", "vc-y", "vc-x-ro", "vc-x-exec", "vc-link-a", "vc-link-b", "diligent")]
    assert len(set(keys)) == len(keys)
    # the trees really are one byte / one bit / one target apart: the diff's tree ids say so
    trees = {
        m: next(
            e
            for e in read_events(grids["on"] / "runs" / _rid("fix-float-add", m) / "events.jsonl")
            if e.get("kind") == "diff"
        )["tree"]
        for m in MODELS
    }
    assert trees["vc-x"] == trees["vc-x2"] == trees["vc-x-ro"]  # same git tree: only the mode bit differs
    assert len({trees["vc-x"], trees["vc-y"], trees["vc-x-exec"], trees["vc-link-a"], trees["vc-link-b"]}) == 5


def test_grid_nondeterministic_task_never_hits(grids):
    recs = _records(grids["on"])
    assert {recs[_rid("fix-float-add-nd", m)]["verify_cache"]["status"] for m in MODELS} == {"opted out"}


def test_grid_classifications_equal_the_uncached_grid(grids):
    on, off = _records(grids["on"]), _records(grids["off"])
    assert on.keys() == off.keys() and len(on) == 2 * len(MODELS)
    for run_id in on:
        assert on[run_id]["classification"] == off[run_id]["classification"], run_id
    assert {r["verify_cache"]["status"] for r in off.values()} == {"off"}
    assert sum(r["verify_cache"]["status"] == "hit" for r in on.values()) == 3
    assert json.loads((grids["on"] / "meta.json").read_text())["verify_cache"] == "on"
    assert json.loads((grids["off"] / "meta.json").read_text())["verify_cache"] == "off"
    assert "| verifier test cache | on: 3 of 20 test results" in (grids["on"] / "LEDGER.md").read_text()
    assert "| verifier test cache | off (--no-verify-cache)" in (grids["off"] / "LEDGER.md").read_text()


def test_bad_verify_field_is_one_line(tmp_path, plain_venvs):
    tasks_dir = tmp_path / "tasks"
    shutil.copytree(ROOT / "tasks" / "fix-float-add", tasks_dir / "fix-float-add")
    toml = tasks_dir / "fix-float-add" / "task.toml"
    original = toml.read_text()
    for table, message in (
        ('[verify]\ndeterministic = "no"\n', "field 'verify.deterministic': Input should be a valid boolean"),
        ("[verify]\nstable = true\n", "field 'verify.stable': unknown field"),
    ):
        toml.write_text(original + "\n" + table)
        code, text = _grid(
            "run", "--venvs", str(plain_venvs), "--tasks-dir", str(tasks_dir), "--out", str(tmp_path / "never")
        )
        lines = [ln for ln in text.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1, text
        assert str(toml) in lines[0] and message in lines[0], lines[0]
        assert not (tmp_path / "never").exists()
