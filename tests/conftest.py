"""Shared fixtures: tasks are loaded from the repo; workspaces live under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Importing LiteLLM must never reach for the network in tests.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from claimgrid.tasks import build_template, load_tasks, materialise  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tasks():
    return load_tasks()


@pytest.fixture(scope="session")
def plain_venvs(tmp_path_factory):
    """A venvs.toml holding only the dependency-free ``plain`` framework (cheap grid checks)."""
    path = tmp_path_factory.mktemp("venvs") / "venvs.toml"
    path.write_text(f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
                    f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n')
    return path


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
    from claimgrid.venvs import ensure_venvs, load_venvs

    try:
        entries = load_venvs()
        params = [getattr(getattr(item, "callspec", None), "params", {}).get("fw") for item in marked]
        if all(params):
            entries = {name: e for name, e in entries.items() if name in set(params)}
        ensure_venvs(entries)
        # The tasks' own locked environments too (tasks with pyproject.toml + uv.lock), as
        # `uv run grid.py` builds them: a framework test may run any shipped task.
        from claimgrid.tasks import ensure_task_envs, load_tasks
        ensure_task_envs(load_tasks().values())
    except ClaimgridError as exc:
        pytest.exit(f"framework venvs or task environments could not be built: {exc}", returncode=3)
