"""Linux ``/proc/.../stat``: the fields after the command name, and CPU seconds from them.

The command name (field 2) is in parentheses and may itself hold spaces or ``)``, so the
fields are split after the *last* ``)``; there, ``state`` is index 0, ``ppid`` 1, and
``utime``, ``stime``, ``cutime``, ``cstime`` are 11 to 14 (clock ticks).
"""

from __future__ import annotations

import os

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def stat_fields(path: str) -> list[bytes] | None:
    """The fields after the command name, or None when the process (or file) is gone.

    Read with one ``os.read`` (a stat line is far under 4 KiB), no file object: a scan of every
    process (:mod:`claimgrid.launch.kill`, after every run) reads a few hundred of these."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    finally:
        os.close(fd)


def cpu_seconds(path: str, children: bool = False) -> float | None:
    """User+system CPU seconds from a stat file; with ``children``, plus the reaped children's."""
    fields = stat_fields(path)
    try:
        return sum(int(f) for f in fields[11 : 15 if children else 13]) * TICK_S if fields else None
    except ValueError:
        return None
