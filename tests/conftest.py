"""Shared fixtures: tasks are loaded from the repo; workspaces live under tmp_path.

Grids that several modules read are run once per session here (``default_grid``,
``ledger_grid``); they are read-only to every test (copy one before changing it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Importing LiteLLM must never reach for the network in tests.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from claimgrid.inputs.tasks import build_template, load_tasks, materialise  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tasks():
    return load_tasks()


@pytest.fixture(scope="session", autouse=True)
def _session_tmpdir(tmp_path_factory):
    """Every temporary folder of the session (the harness's own ``claimgrid-*`` and
    ``cg-warm-*`` folders, in this process and in the ``grid.py`` processes it starts) goes
    under pytest's basetemp, so a run that is killed (or a folder a test forgets) never
    lands in the machine's /tmp. The folder is called ``tmp`` as /tmp is (test_grid_interrupt
    recognises the harness's folders by that parent). Tests that need their own TMPDIR
    (tests/test_bad_input.py) still pass one to their subprocesses."""
    folder = tmp_path_factory.getbasetemp() / "tmp"
    folder.mkdir(exist_ok=True)
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(folder), str(folder)
    yield folder
    tempfile.tempdir = saved_tempdir
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env


@pytest.fixture(scope="session")
def plain_venvs(tmp_path_factory):
    """A venvs.toml holding only the dependency-free ``plain`` framework (cheap grid checks)."""
    path = tmp_path_factory.mktemp("venvs") / "venvs.toml"
    path.write_text(f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
                    f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n')
    return path


@pytest.fixture(scope="session")
def default_grid(tmp_path_factory, plain_venvs):
    """Every distinct cell of the default matrix (all tasks, conditions and default models),
    once, on the dependency-free ``plain`` framework, through ``grid.py run`` in process.
    Read by tests/test_validity_grid.py (calibration, blinding, reclassify) and, as the
    control grid without the hostile framework, by tests/test_guard_attacks.py."""
    from claimgrid.commands.cli import main

    out = tmp_path_factory.mktemp("default-grid") / "ledger"
    # --jobs 4 on two cores: the four `slow` fault runs sleep past their 15 s deadline; more
    # slots than cores let the other runs go on meanwhile (jobs is not a parity fact).
    assert main(["run", "--venvs", str(plain_venvs), "--out", str(out), "--jobs", "4", "--no-progress"]) == 0
    return out


def select_runs(folder: Path, args: list[str]) -> list[dict]:
    """The records of the grid in ``folder`` that a ``grid.py run`` selection (``--tasks``,
    ``--content``, ``--swap``, ``--models``: comma-separated) picks, as dicts."""
    from claimgrid.store.lines import read_runs

    flags = {"--tasks": "task", "--content": "content", "--swap": "swap", "--models": "model"}
    want = {flags[flag]: set(value.split(",")) for flag, value in zip(args[::2], args[1::2])}
    assert set(want) == set(flags.values()), args
    runs = read_runs(folder / "runs.jsonl").values
    return [r for r in runs if all(r[key] in values for key, values in want.items())]


@pytest.fixture(scope="session")
def ledger_grid(tmp_path_factory):
    """The ledger tests' real grid (tests/ledger_support.py): built once per session, shared
    by tests/test_ledger_render.py and tests/test_ledger_browser.py; treat it as read-only
    (``ledger_support.copy_ledger`` gives a writable copy). A failed build fails every test
    that reads it with the same message, without building it again."""
    from .ledger_support import build_ledger

    return build_ledger(tmp_path_factory.mktemp("ledger-grid"))


@pytest.fixture
def workspace(tmp_path, tasks):
    """Factory: ``workspace(task_id, slot_text=None) -> (template, ws, base_commit)``."""

    def make(task_id: str, slot_text: str | None = None):
        task = tasks[task_id]
        template = tmp_path / f"template-{task_id}"
        base = build_template(task, task.slot_text() if slot_text is None else slot_text, template)
        ws = tmp_path / f"ws-{task_id}"
        materialise(template, ws)
        return template, ws, base

    return make


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: build only what will run
def pytest_collection_modifyitems(config, items):
    """Build the framework venvs once, before any test that needs them (no silent skips).

    This is what ``uv run grid.py`` does too: ``uv sync --locked`` per framework, skipped
    when the lock has not changed. A failed build stops the session with its one-line cause.
    Tests parametrized by framework (``fw``, tests/test_conformance.py) need only their
    own framework's venv; any other ``frameworks`` test needs them all.
    """
    marked = [item for item in items if item.get_closest_marker("frameworks")]
    if not marked:
        return
    from claimgrid.errors import ClaimgridError
    from claimgrid.inputs.venvs import ensure_venvs, load_venvs

    try:
        entries = load_venvs()
        params = [getattr(getattr(item, "callspec", None), "params", {}).get("fw") for item in marked]
        if all(params):
            entries = {name: e for name, e in entries.items() if name in set(params)}
        ensure_venvs(entries)
        # The tasks' own locked environments too (tasks with pyproject.toml + uv.lock), as
        # `uv run grid.py` builds them: a framework test may run any shipped task.
        from claimgrid.inputs.tasks import ensure_task_envs, load_tasks
        ensure_task_envs(load_tasks().values())
    except ClaimgridError as exc:
        pytest.exit(f"framework venvs or task environments could not be built: {exc}", returncode=3)
