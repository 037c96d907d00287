"""The verify cache stays sound against what a test run can observe of its own run.

A run's test run used to see its leased uid and its overlay's per-run paths in
``/proc/self/mountinfo``; a fix written to pass only for some of them passed in every run with
the cache (the first run's result served the others) and in half without it. Now every test
run sees the same uid and paths (claimgrid.sandbox.sameview) and the key names them, so such a
fix gets one outcome with and without the cache, and the cache still serves runs that leased
other uids.
"""

from __future__ import annotations

import os
import re

import pytest

from claimgrid.sandbox.guard import detect
from claimgrid.sandbox.sameview import TEST_UID, fixed_uid_works, fixed_view, seen_by_test_run
from claimgrid.verify.cache import VerifyCache
from claimgrid.verify.verifier import SEEN_REPORT_FD, FinishedRun, VerifyOptions, verify

GUARD = detect("auto")

# A "fix" correct only when a hash of the uid, the open descriptors' numbers, the end of the
# command line and the workspace mount's line (its fs type, source and options: lowerdir,
# upperdir, workdir) is even; it prints what it saw.
DEPENDENT = """import hashlib, os, sys

_line = [l for l in open("/proc/self/mountinfo") if " /workspace " in l][0].split(" - ", 1)[1].strip()
_fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
_argv = hashlib.sha256(open("/proc/self/cmdline", "rb").read()).hexdigest()[:16]
SEEN = f"uid={os.getuid()} fds={_fds} cmdline={_argv} mount={_line}"
print(f"SEEN<<{SEEN}>>", file=sys.stderr)
_EVEN = int(hashlib.sha256(SEEN.encode()).hexdigest(), 16) % 2 == 0


def add(a, b):
    return a + b if _EVEN else int(a) + int(b)
"""


def _seen(event: dict) -> set[str]:
    return set(re.findall(r"SEEN<<(.*?)>>", event.get("output_tail") or ""))


@pytest.mark.skipif(not (GUARD.enabled and GUARD.as_root), reason="per-run uids and fixed paths need a root harness")
def test_a_uid_and_path_dependent_fix_gets_one_outcome_with_and_without_the_cache(workspace, tasks):
    if fixed_view() is None:
        pytest.skip("no fixed mount points here (claimgrid.sandbox.sameview.ROOTS)")
    task = tasks["fix-float-add"]
    template, ws, base = workspace("fix-float-add")
    os.chmod(ws.parent, 0o755)  # the test runs' uids read the workspace
    (ws / "src" / "calculator.py").write_text(DEPENDENT)
    boxes = GUARD.limits.boxes(True)
    a, b = boxes.lease(), boxes.lease()  # two runs in flight: two uids
    try:
        assert a.uid != b.uid

        def tests_of(box, cache, run_id):
            options = VerifyOptions(guard=GUARD, cache=cache, run_id=run_id, box=box)
            events = verify(task, None, FinishedRun(template, ws, base), options=options)
            return next(e for e in events if e["kind"] == "tests")

        cache = VerifyCache()
        cached = [tests_of(a, cache, "a"), tests_of(b, cache, "b")]
        uncached = [tests_of(a, None, "a0"), tests_of(b, None, "b0")]
    finally:
        a.release()
        b.release()
    assert [e["cache"] for e in cached] == ["miss", "hit"]  # the cache still serves another uid
    assert cached[1]["verified_by"] == "a"
    outcomes = {e["passed"] for e in cached + uncached}
    assert len(outcomes) == 1 and None not in outcomes, [(e["passed"], e.get("reason")) for e in cached + uncached]
    # What the fix saw is one and the same in every test run: the uid, and the mount's paths.
    seen = _seen(uncached[0]) | _seen(uncached[1]) | _seen(cached[0])
    assert len(seen) == 1, seen
    (line,) = seen
    uid = TEST_UID if fixed_uid_works(GUARD) else None
    if uid is not None:
        assert line.startswith(f"uid={uid} ")
    assert f"fds=[0, 1, 2, 3, {SEEN_REPORT_FD}]" in line  # the report at its fixed number; nothing else
    view = fixed_view()
    assert view is not None and f"lowerdir=/oldroot{view.workspace}," in line and str(ws) not in line
    assert f"upperdir=/oldroot{view.scratch}/upper" in line


def test_the_key_names_what_a_test_run_sees():
    seen = seen_by_test_run(GUARD, None)
    if not GUARD.enabled:
        assert seen == {"uid": os.geteuid(), "paths": "unguarded"}
    elif GUARD.as_root and fixed_view() is not None:
        assert seen is not None and seen["workspace"] == fixed_view().workspace
        assert seen["uid"] == (TEST_UID if fixed_uid_works(GUARD) else None)
    else:
        assert seen is None  # per-run paths: such a test run's result serves no other run
