"""Tests that need one of pyproject's optional extras (``ray``, ``inspect``, ``otel``,
``local-model``): skipped, with the command that installs the extra, where it is absent; a
failure where the run says the extras are part of it.

README's test command (``uv run --group dev pytest``) installs the ``dev`` group and no extra,
so on a fresh clone these tests skip. ``.ci/run`` syncs every extra and sets
``CLAIMGRID_REQUIRE_EXTRAS=1``: there a missing extra is a broken install, and the test fails
instead of skipping. The switch is claimgrid's own, not the ``CI`` variable every CI service
sets, so a user's CI without the extras still skips.

An extra that builds from source (``local-model``: llama-server, compiled once and cached by
uv) is installed by ``.ci/run`` in the background while the tests start: the file its
``PENDING`` variable names appears holding "ok" (or why not) when it ends. Its tests carry
``pytest.mark.extra(NAME)``; tests/conftest.py waits for that file before such a test, outside
the test's timeout, and the test's own ``need`` then finds the extra (or fails, with the
install's last line)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from pathlib import Path

import pytest

REQUIRE = "CLAIMGRID_REQUIRE_EXTRAS"
PENDING = {"local-model": "CLAIMGRID_LOCAL_MODEL_PENDING"}
# llama-server's build from an empty uv cache: ~450 s on two quiet cores, longer beside the tests.
PENDING_WAIT_S = 1800.0


def required() -> bool:
    return os.environ.get(REQUIRE, "") not in ("", "0")


def reason(extra: str) -> str:
    return f"needs the {extra} extra: uv sync --extra {extra} (then the test command again)"


def present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def pending(extra: str) -> Path | None:
    """The file ``.ci/run``'s background install of ``extra`` writes when it ends, while it
    has not yet (None: no such install, or it has ended)."""
    marker = os.environ.get(PENDING.get(extra, ""), "")
    return Path(marker) if marker and not os.path.exists(marker) else None


def wait(extra: str) -> str:
    """Wait for ``.ci/run``'s background install of ``extra`` (bounded); its outcome ("ok",
    its last line, or "" when there was none to wait for)."""
    marker = os.environ.get(PENDING.get(extra, ""), "")
    if not marker:
        return ""
    deadline = time.monotonic() + PENDING_WAIT_S
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            return f"the install did not end within {PENDING_WAIT_S:.0f} s"
        time.sleep(1.0)
    importlib.invalidate_caches()  # the packages appeared while this process ran
    return Path(marker).read_text().strip()


def need(extra: str, *modules: str):
    """Import ``modules`` (the last one is returned), or skip the calling test (or module,
    at import time) with one line naming ``extra`` and its install command; under
    ``CLAIMGRID_REQUIRE_EXTRAS`` a missing module fails instead. While ``.ci/run`` still
    installs ``extra`` (``pending``), nothing is decided at import time (None): the test's
    own call, after conftest's wait, decides."""
    if pending(extra) is not None:
        return None
    missing = [m for m in modules if not present(m)]
    if missing:
        if required():
            status = wait(extra)
            why = f" (the background install: {status})" if status not in ("", "ok") else ""
            pytest.fail(f"{', '.join(missing)} missing although {REQUIRE} is set{why}: {reason(extra)}", pytrace=False)
        pytest.skip(reason(extra), allow_module_level=True)
    return importlib.import_module(modules[-1])
