"""Kernel key rings are no channel between runs (claimgrid/sandbox/keyfilter.py).

The rings are per uid, and a run's uid is leased again by later runs (of this grid or the next
one, and by the verifier's test run of the run). With the guard's seccomp filter no sandboxed
process creates, finds or reads a key: ``add_key``, ``request_key`` and ``keyctl`` fail with
EPERM and ``/proc/keys`` is empty. The control shows the channel is real without the filter:
a key stored by one process of the uid is found by a later one.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from claimgrid.sandbox import keyfilter
from claimgrid.sandbox.guard import PerRun, detect, python_roots

GUARD = detect("auto")
AUDIT = {name: arch for table in keyfilter.ABIS.values() for name, arch, _ in table}

# A process of the run: stores a key in its uid's user ring, or looks for one there.
PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, REQUEST_KEY, KEYCTL = {numbers}
USER_RING, SEARCH, CLEAR = -4, 10, 7
mode, desc = sys.argv[1], sys.argv[2].encode()
out = {{}}
def call(name, *args):
    r = libc.syscall(*args)
    out[name] = [r, ctypes.get_errno() if r == -1 else 0]
if mode == "add":
    call("add_key", ADD_KEY, b"user", desc, b"left for the next run", 21, USER_RING)
elif mode == "find":
    call("keyctl_search", KEYCTL, SEARCH, USER_RING, b"user", desc, 0)
    call("request_key", REQUEST_KEY, b"user", desc, None, 0)
    try:
        out["proc_keys"] = desc.decode() in open("/proc/keys").read()
    except OSError as exc:
        out["proc_keys"] = str(exc)
elif mode == "clear":
    call("keyctl_clear", KEYCTL, CLEAR, USER_RING)
print(json.dumps(out))
"""

needs_guard = pytest.mark.skipif(not GUARD.enabled, reason=f"guard unavailable here: {GUARD.reason}")


def _numbers() -> tuple[int, int, int]:
    table = keyfilter.abis()
    if table is None:
        pytest.skip("no seccomp table for this machine")
    return table[0][2][:3]


def test_the_program_denies_the_key_calls_of_every_abi_and_nothing_else():
    for machine, table in keyfilter.ABIS.items():
        prog = keyfilter.program(machine)
        for _, arch, numbers in table:
            for nr in numbers:
                assert keyfilter.evaluate(prog, nr, arch) == keyfilter.RET_EPERM, (machine, arch, nr)
            others = set(range(0, 460)) - set(numbers)
            assert all(keyfilter.evaluate(prog, nr, arch) == keyfilter.RET_ALLOW for nr in others), (machine, arch)
        # A call in an ABI the table does not name is denied whatever it is.
        assert keyfilter.evaluate(prog, 0, 0x12345678) == keyfilter.RET_EPERM
    assert keyfilter.program("riscv-unknown") is None


def _sandboxed(tmp_path, box, mode: str, desc: str) -> dict:
    (tmp_path / "probe.py").write_text(PROBE.format(numbers=_numbers()))
    os.chmod(tmp_path, 0o755)  # the run's uid reads it
    argv = GUARD.wrap(
        [sys.executable, "/workspace/probe.py", mode, desc],
        workspace=tmp_path,
        writable=False,
        interpreters=python_roots(sys.executable),
        python=sys.executable,
        per_run=PerRun(box=box),
    )
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _outside(tmp_path, uid: int, mode: str, desc: str) -> dict:
    """The same probe as a plain process of ``uid``: no sandbox, no filter (the control)."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable, "-c"]
    proc = subprocess.run(
        [*argv, PROBE.format(numbers=_numbers()), mode, desc], cwd="/", capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@needs_guard
def test_a_sandboxed_run_cannot_store_a_key_and_a_later_run_of_its_uid_cannot_find_one(tmp_path):
    boxes = GUARD.limits.boxes(os.geteuid() == 0)
    desc = f"claimgrid-test-{secrets.token_hex(6)}"
    box = boxes.lease()
    uid = box.uid
    control = os.geteuid() == 0 and uid != 0
    try:
        first = _sandboxed(tmp_path, box, "add", desc)
        assert first["add_key"] == [-1, 1], first  # EPERM: the filter, not a quota or a bad argument
        if control:
            # Without the filter the channel is real: a key one process of the uid stores, a
            # later process of the uid finds.
            stored = _outside(tmp_path, uid, "add", desc)
            assert stored["add_key"][0] > 0, stored
            found = _outside(tmp_path, uid, "find", desc)
            assert found["keyctl_search"][0] == stored["add_key"][0], found
        later = _sandboxed(tmp_path, box, "find", desc)
        assert later["keyctl_search"] == [-1, 1] and later["request_key"] == [-1, 1], later
        assert later["proc_keys"] is False, later  # /proc/keys: seen empty
    finally:
        if control:
            _outside(tmp_path, uid, "clear", desc)
        box.release()
    # The next lease of the machine's uids (a later grid): the same holds.
    box = boxes.lease()
    try:
        again = _sandboxed(tmp_path, box, "find", desc)
        assert again["keyctl_search"] == [-1, 1] and again["proc_keys"] is False, again
    finally:
        box.release()


@needs_guard
def test_the_guard_facts_say_the_key_api_is_denied():
    assert "denied" in GUARD.facts()["kernel_keys"]
