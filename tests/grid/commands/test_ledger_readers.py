"""Every command that reads ledger lines (claimgrid.commands.ledger_readers.READERS), on a real sealed
grid, against every crafted line: a huge line (a 60 MB run id), a deep one (a million ``[``),
a NUL byte, a torn last line, an unsigned appended line, and, for ``runs.jsonl``, a line
removed, added or moved. Each is one line on stderr naming the file and the line, exit 2,
no traceback, nothing written, no evidence deleted (a writer repairs a torn last line: the
leftover of a kill, said so).

Then, for every command that reads a ledger folder (docs/CONTRACTS.md, "Ledger folders are
data"): a symlink planted at each name the command writes (found by an audit hook on a clean
run) is refused and never followed; a stripped seal is refused, and with ``--allow-unsealed``
a removed line is named against the plan and its evidence stays; one edited evidence byte is
named; reclassify lands whole or not at all; an export's file names are slugs."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from claimgrid.commands.cli import build_parser, main
from claimgrid.commands.ledger_readers import NOT_READERS, READERS
from claimgrid.reference.registry import default_models
from claimgrid.store import RUNS_NAME
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
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize("reader, kind", _cases())
def test_a_crafted_line_is_one_line_and_exit_2(sealed, reader, kind, tmp_path, capsys):
    ledger = tmp_path / "ledger"
    shutil.copytree(sealed["ledger"], ledger)
    clean = tmp_path / "clean"
    shutil.copytree(sealed["ledger"], clean)
    for p in ledger.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    files = {
        "runs.jsonl": ledger / "runs.jsonl",
        "events.jsonl": tmp_path / "events.jsonl",
        "verdict log": tmp_path / "verdicts.jsonl",
    }
    shutil.copy(sealed["events"], files["events.jsonl"])
    shutil.copy(sealed["log"], files["verdict log"])
    target = files[reader.reads]
    before = _lines(target)
    target.write_bytes(b"".join(CRAFTED[kind](before)))
    snapshot = _snapshot(ledger)
    argv = reader.command(
        ledger=str(ledger),
        clean=str(clean),
        out=str(tmp_path / "out"),
        venvs=str(sealed["venvs"]),
        events=str(files["events.jsonl"]),
        final=str(sealed["final"]),
        log=str(files["verdict log"]),
    )
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


# ---------------------------------------------------------------- a ledger folder is data

# The files a command opens for writing (without O_EXCL: a name it can be made to follow) or
# renames onto, recorded by an audit hook while the command runs on a clean copy: the names a
# publisher could plant a symlink at, found from what the commands really write.
_WRITES: list[str] | None = None
_HOOKED = False


def _audit(event: str, args: tuple) -> None:
    if _WRITES is None:
        return
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        flags = args[2] if isinstance(args[2], int) else 0
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC) and not flags & os.O_EXCL:
            _WRITES.append(os.fsdecode(args[0]))
    elif event == "os.rename" and isinstance(args[1], (str, bytes, os.PathLike)):
        _WRITES.append(os.fsdecode(args[1]))


def _recorded(argv: list[str]) -> tuple[int, list[str]]:
    global _WRITES, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)  # cannot be removed: inert while _WRITES is None
        _HOOKED = True
    _WRITES = []
    try:
        code = main(argv)
        return code, list(_WRITES)
    finally:
        _WRITES = None


def _where(path: str, ledger: Path, out: Path) -> tuple[str, str] | None:
    """("ledger" | "out", the name relative to it) of a written path; None outside both. The
    export's private temporary folder (.<out>.<random>) stands for ``out``, renamed onto it."""
    p = Path(os.path.abspath(path))
    for root, base in (("ledger", ledger), ("out", out)):
        if p == base:
            return (root, ".")
        if p.is_relative_to(base):
            return (root, str(p.relative_to(base)))
    if p.is_relative_to(out.parent) and p.relative_to(out.parent).parts[0].startswith(f".{out.name}."):
        rest = p.relative_to(out.parent).parts[1:]
        return ("out", str(Path(*rest)) if rest else ".")
    return None


def _fresh(sealed, tmp_path: Path, name: str) -> dict[str, Path]:
    base = tmp_path / name
    ledger, clean = base / "ledger", base / "clean"
    shutil.copytree(sealed["ledger"], ledger)
    shutil.copytree(sealed["ledger"], clean)
    for p in ledger.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return {"ledger": ledger, "clean": clean, "out": base / "out"}


def _argv(reader, sealed, where: dict[str, Path], *extra: str) -> list[str]:
    return [
        *reader.command(
            ledger=str(where["ledger"]),
            clean=str(where["clean"]),
            out=str(where["out"]),
            venvs=str(sealed["venvs"]),
            events=str(sealed["events"]),
            final=str(sealed["final"]),
            log=str(sealed["log"]),
        ),
        *extra,
    ]


LEDGER_READERS = [pytest.param(r, id=r.name) for r in READERS if r.reads == RUNS_NAME]


@pytest.mark.parametrize("reader", LEDGER_READERS)
def test_a_symlink_at_any_name_a_command_writes_is_refused(sealed, reader, tmp_path, capsys):
    """Every name the command writes on a clean copy (RUN.md pages removed first, so they are
    written too), planted in turn as a symlink to a file outside: exit 2, one line, the file
    outside untouched, the symlink left as it was."""
    where = _fresh(sealed, tmp_path, "discover")
    for page in where["ledger"].glob("runs/*/RUN.md"):
        page.unlink()
    code, written = _recorded(_argv(reader, sealed, where))
    assert code in (0, 1), capsys.readouterr()
    # A name inside a folder made with a random name (mkdtemp: ".<name>.<random>.tmp") cannot be
    # planted in advance: the folder is new, private, and its name unknown.
    found = {w for w in (_where(p, where["ledger"], where["out"]) for p in written) if w}
    names = sorted(
        (root, name) for root, name in found if not any(part.startswith(".") for part in Path(name).parts[:-1])
    )
    assert names, written  # every one of these commands writes something
    outside = tmp_path / "outside.txt"
    for n, (root, name) in enumerate(names):
        outside.write_bytes(b"untouched")
        case = _fresh(sealed, tmp_path, f"plant{n}")
        planted = case[root] / name
        planted.parent.mkdir(parents=True, exist_ok=True)
        if planted.is_dir() and not planted.is_symlink():
            shutil.rmtree(planted)
        planted.unlink(missing_ok=True)
        planted.symlink_to(outside)
        capsys.readouterr()
        code = main(_argv(reader, sealed, case))
        out, err = capsys.readouterr()
        assert code == 2, (root, name, out[-1500:], err[-1500:])
        assert len(err.splitlines()) == 1 and "Traceback" not in out + err, (root, name, err)
        assert outside.read_bytes() == b"untouched", (root, name)
        assert planted.is_symlink() and planted.readlink() == outside, (root, name)


def _strip_seals(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    for key in ("seal", "seal_signature"):
        meta.pop(key, None)
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    (folder / "runs.jsonl").write_bytes(b"".join(_unsealed(line) for line in _lines(folder / "runs.jsonl")))


@pytest.mark.parametrize("reader", LEDGER_READERS)
def test_a_stripped_seal_is_refused_and_evidence_is_never_deleted(sealed, reader, tmp_path, capsys):
    """A downgrade (every seal removed) is one line naming the folder, exit 2. With
    --allow-unsealed, a line removed too is named against meta.json's plan (exit 2) and its
    evidence folder stays where it is."""
    where = _fresh(sealed, tmp_path, "stripped")
    _strip_seals(where["ledger"])
    snapshot = _snapshot(where["ledger"])
    capsys.readouterr()
    assert main(_argv(reader, sealed, where)) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and f"{where['ledger']}: not sealed" in err and "--allow-unsealed" in err, err
    assert _snapshot(where["ledger"]) == snapshot
    assert not where["out"].exists() or not any(where["out"].iterdir())
    lines = _lines(where["ledger"] / "runs.jsonl")
    gone = json.loads(lines[0])["run_id"]
    (where["ledger"] / "runs.jsonl").write_bytes(b"".join(lines[1:]))
    snapshot = _snapshot(where["ledger"])
    assert main(_argv(reader, sealed, where, "--allow-unsealed")) == 2
    out, err = capsys.readouterr()
    assert f"planned run(s) have no line: {gone}" in err, (out[-1500:], err[-1500:])
    assert "Traceback" not in out + err
    assert _snapshot(where["ledger"]) == snapshot  # the run's evidence is still there, nothing written
    assert (where["ledger"] / "runs" / gone / "manifest.json").is_file()


@pytest.mark.parametrize("reader", LEDGER_READERS)
def test_one_edited_evidence_byte_is_named_by_every_reader(sealed, reader, tmp_path, capsys):
    where = _fresh(sealed, tmp_path, "edited")
    run_id = json.loads(_lines(where["ledger"] / "runs.jsonl")[-1])["run_id"]
    events = where["ledger"] / "runs" / run_id / "events.jsonl"
    data = events.read_bytes()
    at = data.index(b'"kind"') + 2
    events.write_bytes(data[:at] + (b"X" if data[at : at + 1] != b"X" else b"Y") + data[at + 1 :])
    capsys.readouterr()
    assert main(_argv(reader, sealed, where)) == 2
    out, err = capsys.readouterr()
    assert f"run {run_id}: tampered events.jsonl" in err, (out[-1500:], err[-1500:])
    assert not where["out"].exists() or not any(where["out"].iterdir())


def test_an_unsealed_ledger_is_read_with_allow_unsealed(sealed, tmp_path, capsys):
    where = _fresh(sealed, tmp_path, "allowed")
    _strip_seals(where["ledger"])
    capsys.readouterr()
    assert main(["report", str(where["ledger"]), "--allow-unsealed"]) == 0
    out = capsys.readouterr().out
    assert "not sealed" in out and "its lines agree with meta.json's plan" in out


def test_reclassify_lands_whole_or_not_at_all(sealed, tmp_path, capsys, monkeypatch):
    """A failure after the records, the seal and reclassify.txt were written (while rendering):
    every file of the ledger is as it was."""
    import claimgrid.ledger as ledger_mod

    where = _fresh(sealed, tmp_path, "midway")
    before = _snapshot(where["ledger"])
    real = ledger_mod.render_ledger

    def half_render(folder, summary=None):
        assert (folder / "reclassify.txt").exists()  # written before the render, in the same step
        real(folder, summary)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger_mod, "render_ledger", half_render)
    with pytest.raises(OSError):
        main(["reclassify", str(where["ledger"])])
    assert _snapshot(where["ledger"]) == before


def test_an_export_names_no_file_from_a_path_in_the_ledger(sealed, tmp_path, capsys):
    """A model name that is a path (sealed by its own publisher: it verifies) becomes a slug:
    every exported file is inside --out."""
    from claimgrid.store.seal import load_key

    from tests.grid.commands.test_trust import _reseal

    where = _fresh(sealed, tmp_path, "pathname")
    hostile = "../../escaped/../" + "x" * 300

    def rename(recs):
        for r in recs:
            r["model"] = hostile

    _reseal(where["ledger"], load_key(), edit_records=rename)
    capsys.readouterr()
    assert main(["export", str(where["ledger"]), "--format", "inspect", "--out", str(where["out"])]) == 0
    written = [
        p
        for p in tmp_path.rglob("*.json")
        if not p.is_relative_to(where["ledger"]) and not p.is_relative_to(where["clean"])
    ]
    assert written and all(p.parent == where["out"] for p in written), written
    assert all(len(p.name) < 200 and ".." not in p.name for p in written)
