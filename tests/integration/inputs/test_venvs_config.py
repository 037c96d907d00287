"""venvs.toml parsing, the rebuild stamp, uv failures as one line, locked versions."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from claimgrid.errors import DataError
from claimgrid.inputs.venvs import VenvError, ensure_venvs, framework_versions, load_venvs

LOCK = """version = 1
requires-python = "==3.11.*"

[[package]]
name = "strands-agents"
version = "1.62.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "litellm"
version = "1.110.2"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "httpx"
version = "0.28.1"
source = { registry = "https://pypi.org/simple" }
"""

PYPROJECT = """[project]
name = "fw"
version = "0"
requires-python = ">=3.11,<3.12"
dependencies = ["strands-agents==1.62.0", "litellm==1.110.2"]
"""

# A stand-in for uv: counts its calls; "fails" when FAKE_UV_FAIL is set, else makes the venv python.
FAKE_UV = """#!/bin/sh
echo "$@" >> "{log}"
if [ -n "$FAKE_UV_FAIL" ]; then
  echo "Resolved 3 packages" >&2
  echo "error: Failed to download \\`strands-agents==1.62.0\\`" >&2
  echo "" >&2
  exit 2
fi
mkdir -p "$UV_PROJECT_ENVIRONMENT/bin"
ln -sf /bin/true "$UV_PROJECT_ENVIRONMENT/bin/python"
"""


def _framework(root: Path, name: str) -> None:
    d = root / "frameworks" / name
    d.mkdir(parents=True)
    (d / "pyproject.toml").write_text(PYPROJECT)
    (d / "uv.lock").write_text(LOCK)
    (d / "adapter.py").write_text("FRAMEWORK = 'x'\n")


def _venvs_toml(root: Path, names=("a", "b", "c"), extra: str = "") -> Path:
    body = "".join(
        f'[frameworks.{n}]\npython = "3.11"\nproject = "frameworks/{n}"\n'
        f'adapter = "frameworks/{n}/adapter.py"\n{extra}\n'
        for n in names
    )
    path = root / "venvs.toml"
    path.write_text(body)
    return path


@pytest.fixture
def repo(tmp_path):
    for n in ("a", "b", "c"):
        _framework(tmp_path, n)
    return tmp_path


@pytest.fixture
def fake_uv(tmp_path, monkeypatch):
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "uv-calls.log"
    uv = bindir / "uv"
    uv.write_text(FAKE_UV.format(log=log))
    uv.chmod(uv.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    return lambda: log.read_text().splitlines() if log.exists() else []


def test_the_repo_venvs_toml_parses():
    """Every entry of the repo's venvs.toml (whatever they are) is a complete locked project."""
    entries = load_venvs()
    assert entries
    for e in entries.values():
        assert e.venv.name == e.name and e.venv.parent.name == ".venvs"
        assert e.project.parent.name == "frameworks" and (e.project / "uv.lock").is_file()


def test_every_repo_framework_pins_exactly_in_the_window():
    """Exact pins, the driver's exclude-newer window, and LiteLLM (where locked) at the driver's version."""
    import tomllib

    root = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    window = root["tool"]["uv"]["exclude-newer"]
    litellm = next(d.split("==")[1] for d in root["project"]["dependencies"] if d.startswith("litellm=="))
    for name, e in load_venvs().items():
        py = tomllib.loads((e.project / "pyproject.toml").read_text())
        assert py["tool"]["uv"]["exclude-newer"] == window, name
        assert all(
            "==" in d and not any(op in d for op in (">", "<", "~", "!=")) for d in py["project"]["dependencies"]
        ), name
        locked = framework_versions(e)
        assert locked.get("litellm", litellm) == litellm, name


def test_entries_and_paths(repo):
    entries = load_venvs(_venvs_toml(repo))
    a = entries["a"]
    assert a.project == repo / "frameworks" / "a" and a.adapter_dir == a.project
    assert a.venv_python == repo / ".venvs" / "a" / "bin" / "python" and a.pass_env == ()
    assert a.env_for("/s") == {}


def test_a_framework_env_fills_in_the_sandbox(repo):
    path = _venvs_toml(repo, names=("a",), extra='env = { A_OFF = "true", A_STORE = "{sandbox}/a" }')
    a = load_venvs(path)["a"]
    assert a.env_for("/run/sb") == {"A_OFF": "true", "A_STORE": "/run/sb/a"}


def test_the_launcher_sets_exactly_the_harness_variables(repo):
    """The names an entry may not set are the ones adapter_env computes, plus the table."""
    from claimgrid.inputs.venvs import HARNESS_VARS, harness_env
    from claimgrid.launch import adapter_env

    a = load_venvs(_venvs_toml(repo, names=("a",)))["a"]
    assert set(adapter_env(a, "/sb/home", "/venv/bin/python")) == set(HARNESS_VARS) | set(harness_env())


@pytest.mark.parametrize(
    "mutate, field, message",
    [
        (
            lambda t: t.replace(
                'python = "3.11"\nproject = "frameworks/a"', 'python = "3.11"\nflavour = 1\nproject = "frameworks/a"'
            ),
            "frameworks.a.flavour",
            "unknown field",
        ),
        (
            lambda t: t.replace('adapter = "frameworks/b/adapter.py"\n', ""),
            "frameworks.b.adapter",
            "required field is missing",
        ),
        (
            lambda t: t.replace('project = "frameworks/c"', 'project = "frameworks/zz"'),
            "frameworks.c.project",
            "does not exist",
        ),
        (
            lambda t: t.replace(
                'python = "3.11"\nproject = "frameworks/a"', 'python = "eleven"\nproject = "frameworks/a"'
            ),
            "frameworks.a.python",
            "not a Python version",
        ),
        (lambda t: t + 'env = { "A-B" = "1" }\n', "frameworks.c.env.A-B", "not an environment variable name"),
        (lambda t: t + 'env = { HOME = "/x" }\n', "frameworks.c.env.HOME", "harness variable"),
        (
            lambda t: t + 'env = { HF_HUB_OFFLINE = "0" }\n',
            "frameworks.c.env.HF_HUB_OFFLINE",
            "the same for every framework",
        ),
        (lambda t: t + 'pass_env = ["C_KEY"]\nenv = { C_KEY = "x" }\n', "frameworks.c.env.C_KEY", "pass_env"),
        (lambda t: t + 'env = { C_DIR = "{home}/c" }\n', "frameworks.c.env.C_DIR", "the only placeholder is {sandbox}"),
        (lambda t: t + "env = { C_N = 1 }\n", "frameworks.c.env.C_N", ""),
        (lambda t: t + 'default = "no"\n', "frameworks.c.default", ""),
    ],
)
def test_bad_entries_are_one_line_naming_file_and_field(repo, mutate, field, message):
    path = _venvs_toml(repo)
    path.write_text(mutate(path.read_text()))
    with pytest.raises(DataError) as exc:
        load_venvs(path)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(path)) and f"field '{field}'" in text and message in text


def test_an_entry_out_of_the_default_matrix_runs_only_when_named(repo, capsys):
    """``default = false``: listed and loadable (the conformance suite checks every entry), left
    out of a grid's frameworks unless --frameworks names it; a file with no default entry is
    one line without --frameworks."""
    from types import SimpleNamespace

    from claimgrid.commands.flags import selection
    from claimgrid.inputs.venvs import default_frameworks

    path = _venvs_toml(repo)
    path.write_text(
        path.read_text().replace(
            'adapter = "frameworks/b/adapter.py"\n', 'adapter = "frameworks/b/adapter.py"\ndefault = false\n'
        )
    )
    entries = load_venvs(path)
    assert [n for n, e in entries.items() if not e.default] == ["b"] and list(default_frameworks(entries)) == ["a", "c"]
    args = SimpleNamespace(
        frameworks=None,
        tasks=["t"],
        content=["c"],
        swap=["s"],
        models=None,
        substitute=None,
        suite=None,
        repeats=None,
        venvs=path,
    )
    data = ({"t": None}, {"c": None}, {"s": None})  # the selection of names only
    assert selection(args, *data, entries).frameworks == ("a", "c")
    args.frameworks = ["b"]
    assert selection(args, *data, entries).frameworks == ("b",)
    from claimgrid.commands.cli import main

    (repo / "no-tasks").mkdir()  # the frameworks part of the listing only
    assert main(["list", "--venvs", str(path), "--tasks-dir", str(repo / "no-tasks")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "  b  (not in the default matrix: --frameworks b)" in listed and "  a" in listed
    args.frameworks = None
    with pytest.raises(DataError, match=r"field 'frameworks': every entry has default = false"):
        selection(args, *data, load_venvs(_venvs_toml(repo, names=("a",), extra="default = false")))


def test_missing_lock_is_rejected(repo):
    (repo / "frameworks" / "b" / "uv.lock").unlink()
    with pytest.raises(DataError, match=r"venvs.toml: field 'frameworks.b.project': 'frameworks/b' has no uv.lock"):
        load_venvs(_venvs_toml(repo))


def test_unchanged_env_is_not_rebuilt(repo, fake_uv):
    entries = load_venvs(_venvs_toml(repo))
    first = ensure_venvs(entries)
    assert [i.built for i in first.values()] == [True, True, True]
    calls = fake_uv()
    assert len(calls) == 3 and all("sync --locked" in c for c in calls)
    assert "--python 3.11" in calls[0] and f"--project {repo / 'frameworks' / 'a'}" in calls[0]
    second = ensure_venvs(entries)
    assert [i.built for i in second.values()] == [False, False, False]
    assert len(fake_uv()) == 3  # uv was not called again
    (repo / "frameworks" / "b" / "uv.lock").write_text(LOCK + "\n# relocked\n")
    third = ensure_venvs(entries)
    assert [i.built for i in third.values()] == [False, True, False]
    assert len(fake_uv()) == 4


def test_failed_install_is_one_line_with_the_cause(repo, fake_uv, monkeypatch):
    monkeypatch.setenv("FAKE_UV_FAIL", "1")
    entries = load_venvs(_venvs_toml(repo, names=("a",)))
    with pytest.raises(VenvError) as exc:
        ensure_venvs(entries)
    assert (
        str(exc.value) == "venvs: framework 'a' failed to install: error: Failed to download `strands-agents==1.62.0`"
    )
    assert not (repo / ".venvs" / "a" / ".claimgrid-stamp").exists()


def test_missing_uv_is_one_line(repo, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(VenvError, match=r"^venvs: 'uv' was not found on PATH"):
        ensure_venvs(load_venvs(_venvs_toml(repo)))


def test_framework_versions_from_the_lock(repo):
    """Direct pins and the traffic-shaping packages (httpx: transitive here) plus the lock's hash."""
    import hashlib

    entry = load_venvs(_venvs_toml(repo))["a"]
    assert framework_versions(entry) == {
        "lock_sha256": hashlib.sha256(LOCK.encode()).hexdigest(),
        "httpx": "0.28.1",
        "litellm": "1.110.2",
        "strands-agents": "1.62.0",
    }
    (repo / "frameworks" / "a" / "uv.lock").write_text(LOCK.replace("0.28.1", "0.28.2"))
    changed = framework_versions(entry)
    assert changed["httpx"] == "0.28.2" and changed["lock_sha256"] != hashlib.sha256(LOCK.encode()).hexdigest()


# A uv that takes a while and logs when each build runs; fails for the project named in FAKE_UV_FAIL_FOR.
SLOW_UV = """#!/bin/sh
project=""
while [ $# -gt 0 ]; do [ "$1" = "--project" ] && project="$2"; shift; done
echo "start $(basename "$project") $(date +%s.%N)" >> "{log}"
sleep 0.6
echo "end $(basename "$project") $(date +%s.%N)" >> "{log}"
if [ "$(basename "$project")" = "$FAKE_UV_FAIL_FOR" ]; then
  echo "error: Failed to download \\`strands-agents==1.62.0\\`" >&2
  exit 2
fi
mkdir -p "$UV_PROJECT_ENVIRONMENT/bin"
ln -sf /bin/true "$UV_PROJECT_ENVIRONMENT/bin/python"
"""


def test_builds_run_a_bounded_pool_at_once_and_one_failure_leaves_the_others_built(repo, tmp_path, monkeypatch):
    from claimgrid.inputs.venvs import Builds, build_all

    bindir, log = tmp_path / "slowbin", tmp_path / "slow-uv.log"
    bindir.mkdir()
    (bindir / "uv").write_text(SLOW_UV.format(log=log))
    (bindir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_UV_FAIL_FOR", "b")
    entries = load_venvs(_venvs_toml(repo))
    with pytest.raises(VenvError) as exc:
        build_all(entries, parallel=2)
    assert (
        str(exc.value) == "venvs: framework 'b' failed to install: error: Failed to download `strands-agents==1.62.0`"
    )
    spans: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        _, name, at = line.split()
        spans.setdefault(name, []).append(float(at))
    assert sorted(spans) == ["a", "b", "c"]
    # at most two at once, and two did overlap (a pool, not one after the other)
    events = sorted((t, +1 if i == 0 else -1) for s in spans.values() for i, t in enumerate(s))
    running, peak = 0, 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2
    assert (repo / ".venvs" / "a" / ".claimgrid-stamp").exists() and (
        repo / ".venvs" / "c" / ".claimgrid-stamp"
    ).exists()
    assert not (repo / ".venvs" / "b" / ".claimgrid-stamp").exists()

    # In the background: states, and a current venv is ready without uv being called.
    monkeypatch.delenv("FAKE_UV_FAIL_FOR")
    before = len(log.read_text().splitlines())
    builds = Builds(entries, parallel=2).start()
    assert builds.state("a") == "ready" and builds.state("c") == "ready"
    builds.join()
    assert {n: builds.state(n) for n in entries} == {"a": "ready", "b": "ready", "c": "ready"}
    assert len(log.read_text().splitlines()) == before + 2  # b alone was built
    facts = builds.facts()
    assert facts["b"]["built"] is True and facts["a"]["built"] is False
    assert facts["b"]["ended_unix"] - facts["b"]["started_unix"] >= 0.5
