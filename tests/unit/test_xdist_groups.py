"""The suite's xdist groups are in force (tests/conftest.py ``_join_xdist_group``): under
``--dist loadgroup`` a test's node id carries its group, which is what the scheduler splits
on. Without it every shared grid and module fixture was silently built once per worker."""

from __future__ import annotations

import os

import pytest


def test_a_test_under_loadgroup_carries_its_file_group(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not under pytest-xdist --dist loadgroup (pyproject's addopts run it so)")
    assert request.node.nodeid.endswith("@tests/unit/test_xdist_groups.py"), request.node.nodeid
