"""The same uid and paths in every verifier test run: what the verify cache needs to be sound.

**The uid.** A run leases its own uid (claimgrid.sandbox.slots) and its test run used to run
as it: a test could pass for an even uid only. When the harness is root, a test run sees
:data:`TEST_UID` instead (``PerRun.fixed_uid``: two nested user namespaces map it to the run's
real uid, which still bounds its processes; from the inner namespace the outer map is not
visible, ``/proc/self/uid_map`` reads ``TEST_UID TEST_UID 1``), where the kernel lets an
unprivileged uid create user namespaces (:func:`fixed_uid_works`, probed once).

**The paths.**
A guarded test run's workspace is an overlay whose options the run can read in
``/proc/self/mountinfo``: ``lowerdir=`` the run's workspace, ``upperdir=``/``workdir=`` its
scratch folder, host paths that differ from run to run (the kernel shows them resolved, so a
symlink alias does not help). A test whose result depends on them would make the verify
cache (claimgrid.verify.cache) hand one run's result to another. So, when the harness is root,
each test run is started in a private mount namespace of its own (``unshare --mount
--propagation private``) where the run's workspace and scratch folder are bind-mounted on
two fixed, empty, harness-owned folders (:data:`ROOTS`), and the sandbox is built from those:
every test run reads the same ``lowerdir``, ``upperdir`` and ``workdir``. The binds exist
only in that namespace (gone with its last process); concurrent test runs each have their own.

Not root (the sandbox in a user namespace, no mount privilege), or no usable fixed folder:
:func:`fixed_view` is None, and the test run sees its own paths (the cache then does not
serve such runs: claimgrid.verify.verifier).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass

from claimgrid.sandbox.guard import Guard, PerRun
from claimgrid.sandbox.slots import Box

# The uid every root-harness test run sees (an ordinary user's uid: no meaning inside).
TEST_UID = 1000

# Where the fixed mount points live: the first that is (or can be made) a root-owned folder
# nobody else can write, as the uid leases' lock folder (claimgrid.sandbox.slots).
ROOTS = ("/run/claimgrid-view", os.path.join(tempfile.gettempdir(), "claimgrid-view"))
_BIND = 'mount --bind -- "$1" "$3" && mount --bind -- "$2" "$4" && shift 4 && exec "$@"'


@dataclass(frozen=True)
class FixedView:
    """The two fixed folders a test run's workspace and scratch folder are seen at."""

    workspace: str
    scratch: str

    def argv(self, workspace: str, scratch: str, inner: list[str]) -> list[str]:
        """``inner`` (a sandbox command line built on :attr:`workspace` and :attr:`scratch`)
        run in a private mount namespace where those are binds of ``workspace``/``scratch``."""
        unshare = shutil.which("unshare") or "/usr/bin/unshare"
        return [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _BIND,
            "claimgrid-view",
            workspace,
            scratch,
            self.workspace,
            self.scratch,
            *inner,
        ]


@functools.cache
def fixed_view() -> FixedView | None:
    """The fixed folders, made once per process; None when not root, when ``unshare`` or
    ``mount`` is missing, or when no folder of :data:`ROOTS` is safe to use."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("mount")):
        return None
    for root in ROOTS:
        try:
            os.makedirs(root, mode=0o755, exist_ok=True)
            if not _owned(root):
                continue
            points = [os.path.join(root, name) for name in ("workspace", "scratch")]
            for point in points:
                try:
                    os.mkdir(point, 0o755)
                except FileExistsError:
                    pass
                if not _owned(point):
                    break
            else:
                return FixedView(*points)
        except OSError:
            continue
    return None


def _owned(path: str) -> bool:
    """A real folder (not a link), the harness's, writable by no one else."""
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


@functools.cache
def fixed_uid_works(guard: Guard) -> bool:
    """Whether this machine's sandboxes can show :data:`TEST_UID` (root harness only): one
    trivial sandbox with ``fixed_uid``, asked once per guard and process."""
    if not (guard.enabled and guard.as_root):
        return False
    argv = guard.wrap(["/bin/sh", "-c", "id -u"], workspace="/tmp", writable=False, per_run=PerRun(fixed_uid=TEST_UID))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and proc.stdout.strip() == str(TEST_UID)


def seen_by_test_run(guard: Guard, box: Box | None) -> dict | None:
    """What a verifier test run can observe that the harness could vary from run to run: the
    uid it sees and the paths its overlay shows (the verify cache keys on it). None when that
    differs in every run (a guarded test run without :func:`fixed_view`: its scratch folder is
    new each time), so no result of one run may serve another."""
    if not guard.enabled:
        # Unguarded: a copy in a fresh folder, run as the harness user; the machine, and so the
        # copy's path, is outside the key (docs/running.md, "The verify cache").
        return {"uid": os.geteuid(), "paths": "unguarded"}
    view = fixed_view() if guard.as_root else None
    if view is None:
        return None
    uid = TEST_UID if fixed_uid_works(guard) else (box.uid if box is not None else None)
    return {"uid": uid, "workspace": view.workspace, "scratch": view.scratch}
