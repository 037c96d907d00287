"""The current-figures table of bench/README.md, rewritten by the script that measured them.

A bench script ends with ``record("throughput.py", {"figure": "value", ...})``: its rows of
the table between ``<!-- figures -->`` and ``<!-- /figures -->`` are replaced by the new ones,
each stamped with the day (UTC) and the machine (cores, CPU model, load average before the
write), so the table holds one current value per figure and git holds the history. Rows of
other scripts are kept as they are, in their order; a script's first rows go to the end.

``CLAIMGRID_BENCH_NO_RECORD=1`` prints the rows instead of writing them (a trial run).
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Mapping
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"
BEGIN, END = "<!-- figures -->", "<!-- /figures -->"
HEADER = ["| script | figure | value | recorded |", "| --- | --- | --- | --- |"]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's name where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """``"2 cores, AMD EPYC 7763, load 0.4"``: what the figures were measured on."""
    load = f", load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{os.cpu_count()} cores, {cpu_model()}{load}"


def stamp(now: datetime.datetime | None = None) -> str:
    """The ``recorded`` cell: the day in UTC and the machine."""
    now = now or datetime.datetime.now(datetime.UTC)
    return f"{now:%Y-%m-%d}, {machine()}"


def rows(text: str) -> list[list[str]]:
    """The table's data rows, each as its four cells (``\\|`` kept escaped)."""
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        raise ValueError(f"{README.name}: no {BEGIN} ... {END} block")
    out = []
    for line in text[start + len(BEGIN) : stop].splitlines():
        line = line.strip()
        if not line.startswith("|") or line in HEADER:
            continue
        cells = [c.strip() for c in line.strip("|").replace("\\|", "\0").split("|")]
        out.append([c.replace("\0", "\\|") for c in cells])
    return out


def rewrite(text: str, script: str, figures: Mapping[str, str], recorded: str) -> str:
    """``text`` with ``script``'s rows replaced by ``figures`` (in their order), stamped ``recorded``."""
    if not figures:
        raise ValueError(f"{script}: no figures to record")
    old = rows(text)
    new = [[f"`{script}`", _cell(k), _cell(v), _cell(recorded)] for k, v in figures.items()]
    mine = [i for i, r in enumerate(old) if r[0] == f"`{script}`"]
    at = mine[0] if mine else len(old)
    kept = [r for r in old if r[0] != f"`{script}`"]
    at -= sum(1 for i in mine if i < at)
    table = kept[:at] + new + kept[at:]
    body = "\n".join([*HEADER, *("| " + " | ".join(r) + " |" for r in table)])
    start, stop = text.index(BEGIN), text.index(END)
    return text[: start + len(BEGIN)] + "\n" + body + "\n" + text[stop:]


def record(script: str, figures: Mapping[str, str], readme: Path = README) -> None:
    """Write ``script``'s figures into the README's table (print them on a trial run)."""
    recorded = stamp()
    if os.environ.get("CLAIMGRID_BENCH_NO_RECORD"):
        for k, v in figures.items():
            print(f"figure {script}: {k} = {v} ({recorded})")
        return
    readme.write_text(rewrite(readme.read_text(), script, figures, recorded))
    print(f"recorded {len(figures)} figure(s) of {script} in {readme}")
