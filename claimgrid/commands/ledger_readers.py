"""The ``grid.py`` commands that read a ledger's JSON lines, and what each reads.

Every one reads through the one bounded parser (:mod:`claimgrid.store.lines`: a line over
``caps.LEDGER_LINE_MAX_BYTES``, nested past ``caps.LEDGER_MAX_DEPTH``, holding a NUL byte,
not JSON, or whose run id is no folder name, is refused as that line) and, for a ledger
folder, checks its shape (:mod:`claimgrid.store.inert`: no symlink, FIFO or unknown name)
and verifies its seal over the set of lines first (:mod:`claimgrid.store.seal`; an unsealed
ledger only with ``--allow-unsealed``). Bad input is one line naming the file and the line,
exit 2, nothing written.

:data:`READERS` is the list tests/grid/commands/test_ledger_readers.py crosses with every
crafted line; :data:`NOT_READERS` names every other command with the reason it reads no
ledger line. A new command goes into one of the two (the test fails otherwise).

Each reader's ``argv`` is a template over: ``{ledger}`` the ledger folder, ``{clean}``
another good ledger, ``{out}`` a new folder, ``{venvs}`` a venvs.toml, ``{events}`` a run's
``events.jsonl``, ``{final}`` a final report file, ``{log}`` a ``grid.py check --log``.
"""

from __future__ import annotations

from dataclasses import dataclass

from claimgrid.store import EVENTS_NAME, RUNS_NAME


@dataclass(frozen=True)
class Reader:
    """One way a command reads ledger lines: ``reads`` is the file the crafted line goes
    into (``runs.jsonl``, ``events.jsonl`` or ``verdict log``); ``writes``: the command
    writes the ledger (a torn last line is a kill's leftover it repairs, saying so)."""

    name: str
    argv: tuple[str, ...]
    reads: str
    writes: bool = False

    def command(self, **values: str) -> list[str]:
        return [part.format(**values) for part in self.argv]


READERS: tuple[Reader, ...] = (
    Reader("compare A", ("compare", "{ledger}", "{clean}", "--out", "{out}"), RUNS_NAME),
    Reader("compare B", ("compare", "{clean}", "{ledger}", "--out", "{out}"), RUNS_NAME),
    Reader("reclassify", ("reclassify", "{ledger}"), RUNS_NAME, writes=True),
    Reader("run --resume", ("run", "--resume", "{ledger}", "--venvs", "{venvs}", "--no-progress"), RUNS_NAME, True),
    Reader("replay", ("replay", "{ledger}", "--venvs", "{venvs}", "--out", "{out}", "--no-progress"), RUNS_NAME),
    Reader("export inspect", ("export", "{ledger}", "--format", "inspect", "--out", "{out}"), RUNS_NAME),
    Reader("export otel", ("export", "{ledger}", "--format", "otel", "--out", "{out}"), RUNS_NAME),
    Reader("report", ("report", "{ledger}"), RUNS_NAME),
    Reader("check --transcript", ("check", "--final", "{final}", "--transcript", "{events}"), EVENTS_NAME),
    Reader("check --report", ("check", "--report", "{log}"), "verdict log"),
)

NOT_READERS: dict[str, str] = {
    "list": "lists the data folders",
    "check-task": "reads tasks/",
    "gateway": "serves model calls",
    "venvs": "builds virtualenvs",
    "new-framework": "writes a framework skeleton",
    "verify": "reads a git work tree and a TOML expectation file, no ledger line",
    "audit": "reads runs made elsewhere (transcripts, verdict files), never a ledger; writes a new sealed one",
    "check-ledger": "reads a folder's regular files as bytes for machine paths: no line parsed, no link followed, nothing written",
}
