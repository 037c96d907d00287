"""Every command that reads ledger lines (claimgrid.commands.ledger_readers.READERS), on a real sealed
grid, against every crafted line: a huge line (a 60 MB run id), a deep one (a million ``[``),
a NUL byte, a torn last line, an unsigned appended line, and, for ``runs.jsonl``, a line
removed, added or moved. Each is one line on stderr naming the file and the line, exit 2,
no traceback, nothing written, no evidence deleted (a writer repairs a torn last line: the
leftover of a kill, said so)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from claimgrid.commands.cli import build_parser, main
from claimgrid.commands.ledger_readers import NOT_READERS, READERS
from claimgrid.reference.registry import default_models
from claimgrid.store.lines import read_runs

from tests.grid.commands.test_trust import _cell_args


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _unsealed(line: bytes) -> bytes:
    rec = json.loads(line)
    rec.pop("seal")
    return json.dumps(rec).encode() + b"\n"


# kind -> (edit of the file's lines, the line the refusal names: a number from the end, or
# "first" for the line where the sealed order first breaks)
CRAFTED = {
    "huge": lambda ls: [*ls, b'{"run_id": "' + b"x" * (60 << 20) + b'"}\n'],
    "deep": lambda ls: [*ls, b"[" * 1_000_000 + b"\n"],
    "nul": lambda ls: [*ls, ls[-1].replace(b'"', b'"\0', 1)],
    "torn": lambda ls: [*ls, ls[-1][: len(ls[-1]) // 2]],
    "unsigned": lambda ls: [*ls, _unsealed(ls[0])],
    "removed": lambda ls: ls[1:],
    "added": lambda ls: [*ls, ls[0]],
    "reordered": lambda ls: [ls[1], ls[0], *ls[2:]],
}
SET_EDITS = ("unsigned", "removed", "added", "reordered")  # only a sealed runs.jsonl can tell


def _named_line(kind: str, n: int) -> int:
    """The line number the refusal names, for a file of ``n`` lines before the edit."""
    return {"removed": 1, "reordered": 1}.get(kind, n + 1)


@pytest.fixture(scope="module")
def sealed(plain_venvs, tmp_path_factory):
    """A small real grid (one untreated builder cell on three default models), sealed; a verdict log."""
    base = tmp_path_factory.mktemp("readers")
    ledger = base / "ledger"
    models = ",".join(default_models()[:3])
    argv = ["run", "--venvs", str(plain_venvs), "--out", str(ledger), *_cell_args(), "--models", models]
    assert main([*argv, "--no-progress"]) == 0
    runs = read_runs(ledger / "runs.jsonl").values
    assert len(runs) >= 2, "the crafted edits need two lines"
    events = base / "events.jsonl"
    shutil.copy(ledger / "runs" / runs[0]["run_id"] / "events.jsonl", events)
    final = base / "final.txt"
    final.write_text("Done: fixed it.\n")
    log = base / "verdicts.jsonl"
    assert main(["check", "--final", str(final), "--transcript", str(events), "--log", str(log)]) in (0, 1)
    return {"ledger": ledger, "events": events, "final": final, "log": log, "venvs": plain_venvs}


def test_every_command_is_a_reader_or_says_why_not():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    readers = {r.argv[0] for r in READERS}
    assert set(sub.choices) == readers | set(NOT_READERS), set(sub.choices) ^ (readers | set(NOT_READERS))
    assert not readers & set(NOT_READERS)


def _cases() -> list:
    return [
        pytest.param(reader, kind, id=f"{reader.name}-{kind}")
        for reader in READERS
        for kind in CRAFTED
        if kind not in SET_EDITS or reader.reads == "runs.jsonl"
    ]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize("reader, kind", _cases())
def test_a_crafted_line_is_one_line_and_exit_2(sealed, reader, kind, tmp_path, capsys):
    ledger = tmp_path / "ledger"
    shutil.copytree(sealed["ledger"], ledger)
    clean = tmp_path / "clean"
    shutil.copytree(sealed["ledger"], clean)
    for p in ledger.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    files = {"runs.jsonl": ledger / "runs.jsonl", "events.jsonl": tmp_path / "events.jsonl",
             "verdict log": tmp_path / "verdicts.jsonl"}
    shutil.copy(sealed["events"], files["events.jsonl"])
    shutil.copy(sealed["log"], files["verdict log"])
    target = files[reader.reads]
    before = _lines(target)
    target.write_bytes(b"".join(CRAFTED[kind](before)))
    snapshot = _snapshot(ledger)
    argv = reader.command(ledger=str(ledger), clean=str(clean), out=str(tmp_path / "out"), venvs=str(sealed["venvs"]),
                          events=str(files["events.jsonl"]), final=str(sealed["final"]), log=str(files["verdict log"]))
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    if kind == "torn" and reader.writes:  # a kill's leftover: the writer drops it and says so
        assert code == 0, (out, err)
        assert f"dropped a torn last line (line {len(before) + 1}" in out
        assert _lines(target) == before
        return
    assert code == 2, (out[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and err.startswith("grid.py: error: "), err[:2000]
    assert "Traceback" not in out + err
    number = _named_line(kind, len(before))
    named = (f"{target.name} line {number}", f"{target}:{number}", f"{target.name} record {number}")
    assert any(n in err for n in named), (named, err[:2000])
    assert len(err) < 4000  # a 60 MB line is named, never echoed
    assert _snapshot(ledger) == snapshot  # nothing written, no evidence deleted
    assert not (tmp_path / "out" / "runs.jsonl").exists()
