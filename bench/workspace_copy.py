"""CPU and wall time of one workspace's copy and removal, per file system.

    uv run bench/workspace_copy.py                  # /tmp and /dev/shm
    uv run bench/workspace_copy.py /some/folder     # any folders

Builds the first default task's template in each folder (as a grid does), then copies it
with ``tasks.materialise`` (checked against its digest) and removes the copy with
``anybytes.remove_tree``, 200 times, and prints the driver's user and system CPU and the
wall time per copy and removal: the per-run file churn the node's work folder takes
(``claimgrid.execute.node.work_parent`` puts it on a tmpfs when it can).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.anybytes import remove_tree  # noqa: E402
from claimgrid.inputs.tasks import build_template, in_suite, load_tasks, materialise, seal_template  # noqa: E402

COPIES = 200


def main(argv: list[str]) -> int:
    tasks = load_tasks()
    task = tasks[next(iter(in_suite(tasks, "default")))]
    for base in argv or ["/tmp", "/dev/shm"]:
        folder = Path(tempfile.mkdtemp(prefix="claimgrid-bench-copy-", dir=base))
        try:
            template = folder / "template"
            build_template(task, task.slot_text(), template)
            digest = seal_template(template)
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            for i in range(COPIES):
                ws = folder / f"ws{i}"
                materialise(template, ws, digest)
                remove_tree(ws)
            r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - t0
            per = 1000 / COPIES
            print(
                f"{base}: {task.id} template, per copy and removal: user {(r1.ru_utime - r0.ru_utime) * per:.2f} ms, "
                f"system {(r1.ru_stime - r0.ru_stime) * per:.2f} ms, wall {wall * per:.2f} ms"
            )
        finally:
            remove_tree(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
