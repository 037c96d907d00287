"""Evidence no agent can forge, end to end through ``grid.py`` with real subprocesses:

* a scripted hostile agent whose test file attacks the template, the store and a
  root-only file when the verifier runs it: every attack fails and no other run's
  classification changes (compared with the same grid without it);
* a template tampered mid-grid is a recorded harness error, never copied;
* one writer per ledger folder (two concurrent ``--resume``);
* ``reclassify`` and ``--resume`` refuse edited, missing or extra evidence by run id and
  a torn line in the middle of ``runs.jsonl`` by line number; a torn last line is repaired
  and said.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claimgrid.sandbox.guard import detect
from claimgrid.store import RunStore
from claimgrid.store.lines import read_runs
from claimgrid.store.seal import load_key

from tests.conftest import ROOT

HOSTILE = ROOT / "tests" / "fixtures" / "frameworks" / "hostile_verifier" / "adapter.py"
BASE = ["--tasks", "fix-float-add", "--content", "clean", "--swap", "none", "--no-progress"]


@pytest.fixture(scope="module")
def venvs_toml(tmp_path_factory):
    path = tmp_path_factory.mktemp("venvs") / "venvs.toml"
    plain = ROOT / "frameworks" / "plain"
    path.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{plain}"\nadapter = "{plain}/adapter.py"\n'
        f'[frameworks.hostile]\npython = "3.11"\nproject = "{plain}"\nadapter = "{HOSTILE}"\n'
        f'pass_env = ["CLAIMGRID_HOSTILE_TARGETS"]\n'
    )
    return path


def _grid(*args, env=None, **kw):
    return subprocess.Popen(
        [sys.executable, str(ROOT / "grid.py"), *args],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        **kw,
    )


def _run(*args, env=None, timeout=600):
    proc = _grid(*args, env=env)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _records(folder: Path) -> list[dict]:
    return read_runs(folder / "runs.jsonl").values


def _by_id(folder: Path) -> dict:
    return {r["run_id"]: r["classification"] for r in _records(folder)}


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory, venvs_toml):
    """A finished grid of plain runs, copied by each test that edits it."""
    out = tmp_path_factory.mktemp("grid") / "ledger"
    code, text, err = _run(
        "run",
        "--venvs",
        str(venvs_toml),
        "--frameworks",
        "plain",
        "--out",
        str(out),
        "--models",
        "diligent,narrator,reader",
        "--jobs",
        "2",
        *BASE,
    )
    assert code == 0, text + err
    return out


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    (dest / ".lock").unlink(missing_ok=True)
    return dest


@pytest.mark.skipif(not detect("auto").enabled, reason="the guard is unavailable on this machine")
def test_a_hostile_test_file_reaches_nothing_and_changes_no_other_run(tmp_path, venvs_toml, small_grid):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = private / "root-only"
    secret.write_text("TOP-SECRET-BYTES")
    secret.chmod(0o600)
    out = tmp_path / "hostile-grid"
    targets = {"runs_jsonl": str(out / "runs.jsonl"), "secret": str(secret)}
    code, text, err = _run(
        "run",
        "--venvs",
        str(venvs_toml),
        "--frameworks",
        "hostile,plain",
        "--out",
        str(out),
        "--models",
        "diligent,narrator,reader",
        "--jobs",
        "1",
        *BASE,
        env={"CLAIMGRID_HOSTILE_TARGETS": json.dumps(targets)},
    )
    assert code == 0, text + err  # a template changed mid-grid would be a harness error and exit 1
    assert "HARNESS ERROR" not in text + err
    time.sleep(1.5)  # the daemon's repeat interval: it would have written by now
    records = _records(out)
    assert not any(r["run_id"].startswith("forged") for r in records)
    assert RunStore(out).check_integrity() == []
    hostile = [r for r in records if r["framework"] == "hostile"]
    assert len(hostile) == 3
    for r in hostile:
        output = (out / r["evidence_dir"] / "test_output.txt").read_text()
        assert "HOSTILE 1 template targets" in output, output
        assert "TOP-SECRET-BYTES" not in output
        for target in ("template", "runs_jsonl", "secret"):
            assert f"'{target}': 'refused" in output, output
        assert r["classification"]["outcome"] == "SCOPE_VIOLATION"  # it wrote under tests/
    control = _by_id(small_grid)
    plain = {rid: c for rid, c in _by_id(out).items() if rid.startswith("plain.")}
    assert plain == control  # every other run classified exactly as without the hostile agent
    assert {c["outcome"] for c in plain.values()} == {"PASS", "EMPTY_DIFF"}


def test_a_template_tampered_mid_grid_is_a_harness_error_never_copied(tmp_path, venvs_toml):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "grid"
    proc = _grid(
        "run",
        "--venvs",
        str(venvs_toml),
        "--frameworks",
        "plain",
        "--out",
        str(out),
        "--jobs",
        "1",
        "--models",
        "narrator",
        "--repeats",
        "8",
        *BASE,
        env={"TMPDIR": str(tmpdir)},
    )
    deadline = time.monotonic() + 300
    while (not (out / "runs.jsonl").exists() or len(_records(out)) < 2) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    [template] = list(tmpdir.glob("claimgrid-*/templates/fix-float-add.clean"))
    target = template / "src" / "calculator.py"
    assert not os.access(target, os.W_OK) or os.geteuid() == 0
    assert oct(target.stat().st_mode & 0o777) == "0o444" and oct(template.stat().st_mode & 0o777) == "0o555"
    target.chmod(0o644)  # root could always write it: the digest is what catches it
    target.write_text(target.read_text().replace("return int(a) + int(b)", "return a + b"))
    text, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, text + err
    assert "HARNESS ERROR" in text + err and "changed since it was built" in text + err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["harness_errors"] and all("changed since it was built" in e["error"] for e in meta["harness_errors"])
    records = _records(out)
    assert 2 <= len(records) < 8
    # a narrator calls no tool: no run was copied from the poisoned template
    assert {r["classification"]["outcome"] for r in records} == {"EMPTY_DIFF"}


def _unfinished(out: Path, keep: int) -> None:
    """``out`` as its publisher's grid stopped after ``keep`` lines: the lines and meta.json
    re-sealed with the session's key (a ledger cut after its seal is refused: the seal covers
    the set of lines)."""
    store = RunStore(out, load_key())
    meta = store.read_meta()
    meta.update(finished=None)
    store.rewrite(_records(out)[:keep])
    store.write_meta(meta)


def test_two_concurrent_resumes_one_writer(tmp_path, venvs_toml, small_grid):
    out = _copy(small_grid, tmp_path / "grid")
    lines = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    _unfinished(out, len(lines) - 2)  # two cells to run again
    first = _grid("run", "--resume", str(out), "--venvs", str(venvs_toml))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and first.poll() is None:
        holder = (out / ".lock").read_text() if (out / ".lock").exists() else ""
        if str(first.pid) in holder:
            break
        time.sleep(0.02)
    second = _run("run", "--resume", str(out), "--venvs", str(venvs_toml))
    text, err = first.communicate(timeout=600)
    assert first.returncode == 0, text + err
    code, out2, err2 = second
    assert code == 2, out2 + err2
    [line] = err2.strip().splitlines()
    assert f"pid {first.pid}" in line and "--resume" in line and "one writer per ledger folder" in line
    ids = [r["run_id"] for r in _records(out)]
    assert len(ids) == len(set(ids)) == len(lines)
    # a plain run --out on a folder in use names the holder too; on a finished one, says to resume
    code, _, err3 = _run("run", "--venvs", str(venvs_toml), "--frameworks", "plain", "--out", str(out), *BASE)
    assert code == 2 and len(err3.strip().splitlines()) == 1, err3
    assert f"--out {out}" in err3 and "exists" in err3 and "--resume" in err3, err3


def test_edited_evidence_is_refused_by_reclassify_and_resume(tmp_path, venvs_toml, small_grid):
    out = _copy(small_grid, tmp_path / "grid")
    before = (out / "runs.jsonl").read_bytes()
    victim = next(r["run_id"] for r in _records(out) if r["classification"]["outcome"] == "EMPTY_DIFF")
    events = out / "runs" / victim / "events.jsonl"
    events.chmod(0o644)
    text = events.read_text()
    assert '"empty": true' in text
    events.write_text(text.replace('"empty": true', '"empty": false'))  # EMPTY_DIFF would become PASS
    other = next(r["run_id"] for r in _records(out) if r["run_id"] != victim)
    (out / "runs" / other / "notes.txt").write_text("added later")
    (out / "runs" / other / "diff.patch").unlink()
    (out / "runs" / other / "RUN.md").write_text("rendered")  # a derived file: not extra
    for argv in (["reclassify", str(out)], ["run", "--resume", str(out), "--venvs", str(venvs_toml)]):
        code, text, err = _run(*argv)
        assert code == 2, text + err
        assert f"run {victim}: tampered events.jsonl" in err
        assert f"run {other}: extra notes.txt" in err and f"run {other}: missing diff.patch" in err
        assert "RUN.md" not in err
        assert (out / "runs.jsonl").read_bytes() == before  # nothing adopted


def test_torn_lines(tmp_path, venvs_toml, small_grid):
    out = _copy(small_grid, tmp_path / "mid")
    lines = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + "\n"
    (out / "runs.jsonl").write_text("".join(lines))
    code, text, err = _run("reclassify", str(out))
    assert code == 2 and "runs.jsonl:2: not valid JSON" in err, text + err  # the file and the line
    assert (out / "runs.jsonl").read_text() == "".join(lines)

    out = _copy(small_grid, tmp_path / "last")
    data = (out / "runs.jsonl").read_text()
    torn = data.rstrip("\n").rsplit("\n", 1)
    _unfinished(out, len(data.splitlines()) - 1)
    with (out / "runs.jsonl").open("a") as f:
        f.write(torn[1][:40])  # a kill mid-append
    code, text, err = _run("run", "--resume", str(out), "--venvs", str(venvs_toml))
    assert code == 0, text + err
    assert f"dropped a torn last line (line {len(data.splitlines())}" in text
    assert "1 to run" in text
    assert len(_records(out)) == len(data.splitlines())
