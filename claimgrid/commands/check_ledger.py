"""``grid.py check-ledger DIR``: the machine paths a ledger folder would publish.

A published ledger holds no path of the publisher's machine (DESIGN.md §7). Ledgers written
before claimgrid named its folders by their role (:mod:`claimgrid.machinepaths`) may hold
some: this command reads every regular file in the folder (following no link, executing
nothing, writing nothing) and prints one line per file that holds any, with how many and the
first, then one line of totals. Exit 0 when none is found, 1 when some are, 2 when ``DIR`` is
not a ledger folder.

Files are told apart by who wrote them: the derived pages and records (what ``report`` and
the harness write: LEDGER.md, RUNS.md, RUN.md, ledger.html, meta.json, runs.jsonl, a bundle's
control.json...) and the raw evidence of what an agent, its framework or the model produced
(transcripts, exchanges, stderr of the agent's process): the harness stores the latter as it
was, so a path there is the agent's text, said apart.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from claimgrid.commands.validate import UsageError
from claimgrid.machinepaths import find
from claimgrid.store import RUNS_NAME, LedgerFolder

# Files in a run's bundle that hold what the agent, its framework or the model produced (events.jsonl
# and stderr.txt also the harness's own lines: the harness names its folders by role since it scrubs them).
AGENT_WRITTEN = (
    "transcript.json",
    "gateway.jsonl",
    "diff.patch",
    "trace.json",
    "test_output.txt",
    "events.jsonl",  # the harness's events and the runtime's, as the framework reported them
    "stderr.txt",
)
MAX_FILE_BYTES = 64 * 1024 * 1024  # a bigger file is reported as not read, never read whole


def scan(folder: Path) -> list[tuple[str, int, str, str]]:
    """(relative path, hits, first hit, "derived" | "evidence" | "not read") per file with any."""
    out = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            # Opened without following a link and without blocking on a FIFO, then checked on the
            # descriptor: an entry swapped after the walk listed it is skipped, never followed.
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode):
                    continue
                if st.st_size > MAX_FILE_BYTES:
                    out.append((rel, 0, "", "not read"))
                    continue
                text = fh.read(MAX_FILE_BYTES + 1).decode("utf-8", "replace")
            hits = find(text)
            if hits:
                kind = "evidence" if name in AGENT_WRITTEN else "derived"
                out.append((rel, len(hits), hits[0], kind))
    return out


def cmd_check_ledger(args) -> int:
    folder = args.dir
    if not folder.is_dir() or not LedgerFolder(folder).has_runs():
        raise UsageError(f"check-ledger {folder}: not a grid folder (no {RUNS_NAME})")
    found = scan(folder)
    for rel, n, first, kind in found:
        if kind == "not read":
            print(f"{rel}: not read (over {MAX_FILE_BYTES} bytes)")
        else:
            print(f"{rel}: {n} machine path(s) ({kind}), e.g. {first!a}")
    derived = sum(n for _, n, _, k in found if k == "derived")
    agent = sum(n for _, n, _, k in found if k == "evidence")
    if not found:
        print(f"{folder}: no machine path found")
        return 0
    print(
        f"{folder}: {derived} machine path(s) in derived files and records, {agent} in evidence "
        f"(as the agent, its framework or the harness of its day recorded it), in {len(found)} file(s)"
    )
    return 1


def add_parser(sub) -> None:
    cl = sub.add_parser(
        "check-ledger", help="list the machine paths (home, temporary, checkout folders) a ledger folder holds"
    )
    cl.add_argument("dir", type=Path, help="the ledger folder")
