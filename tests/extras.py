"""Tests that need one of pyproject's optional extras (``ray``, ``inspect``, ``otel``,
``local-model``): skipped, with the command that installs the extra, where it is absent; a
failure where the run says the extras are part of it.

README's test command (``uv run --group dev pytest``) installs the ``dev`` group and no extra,
so on a fresh clone these tests skip. ``.ci/run`` syncs every extra and sets
``CLAIMGRID_REQUIRE_EXTRAS=1``: there a missing extra is a broken install, and the test fails
instead of skipping. The switch is claimgrid's own, not the ``CI`` variable every CI service
sets, so a user's CI without the extras still skips."""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest

REQUIRE = "CLAIMGRID_REQUIRE_EXTRAS"


def required() -> bool:
    return os.environ.get(REQUIRE, "") not in ("", "0")


def reason(extra: str) -> str:
    return f"needs the {extra} extra: uv sync --extra {extra} (then the test command again)"


def present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def need(extra: str, *modules: str):
    """Import ``modules`` (the last one is returned), or skip the calling test (or module,
    at import time) with one line naming ``extra`` and its install command; under
    ``CLAIMGRID_REQUIRE_EXTRAS`` a missing module fails instead."""
    missing = [m for m in modules if not present(m)]
    if missing:
        if required():
            pytest.fail(f"{', '.join(missing)} missing although {REQUIRE} is set: {reason(extra)}", pytrace=False)
        pytest.skip(reason(extra), allow_module_level=True)
    return importlib.import_module(modules[-1])
