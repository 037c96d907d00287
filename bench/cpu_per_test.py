"""A pytest plugin that measures CPU seconds per test phase (the suite's cost on CI is CPU
on two cores, not wall time, which sleeps and waits inflate).

    uv run --group dev pytest -p bench.cpu_per_test  [CLAIMGRID_TEST_CPU=out.tsv]

Each phase (setup, call, teardown) is charged the CPU of the worker process and of every
child it waited for (``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``; grandchildren count once their
parent waited for them). Lines ``cpu_s<TAB>wall_s<TAB>phase<TAB>nodeid<TAB>start_s<TAB>worker`` are
appended to $CLAIMGRID_TEST_CPU (default ``test-cpu.tsv``); sort by the first column for the
costliest. ``start_s`` (seconds since the epoch) and ``worker`` (xdist's ``gw<N>``) give each
worker's timeline: where the session's tail and idle cores are.
"""

from __future__ import annotations

import os
import resource
import time

import pytest


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _measure(item, phase: str):
    t0, w0, start = _cpu(), time.monotonic(), time.time()
    try:
        return (yield)
    finally:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
        line = f"{_cpu() - t0:.2f}\t{time.monotonic() - w0:.2f}\t{phase}\t{item.nodeid}\t{start:.1f}\t{worker}\n"
        with open(os.environ.get("CLAIMGRID_TEST_CPU", "test-cpu.tsv"), "a") as f:
            f.write(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _measure(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _measure(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _measure(item, "teardown"))
