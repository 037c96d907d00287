"""Reading a published ledger safely, through ``grid.py`` on real grids:

* a hostile ledger (its meta.json names a policy file shipped inside it, sealed by its
  author) runs nothing on ``reclassify``, ``--resume``, ``replay`` or ``compare``;
* a sealed ledger with one byte changed in a file or a line is refused by ``reclassify``,
  ``--resume`` and ``compare``, naming it, and nothing is rewritten;
* ``--resume`` derives every stored run's classification again from its evidence: a line
  that disagrees with its evidence is not republished, even when its signature is good;
* ``compare`` of a grid with itself exits 0; of two grids that differ in one framework's
  behaviour it lists exactly the cells whose runs that behaviour reached.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference.registry import default_substitute
from claimgrid.store import RunStore
from claimgrid.store.lines import read_events, read_runs
from claimgrid.store.seal import load_key

from tests.conftest import ROOT


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)  # writable, to be tampered with
    return dst


def _records(folder: Path) -> list[dict]:
    return read_runs(folder / "runs.jsonl").values


def _reseal(folder: Path, key, edit_meta=None, edit_records=None) -> None:
    """Rewrite meta.json and runs.jsonl sealed by ``key`` (the ledger's author), after the edits."""
    store = RunStore(folder, key)
    meta = store.read_meta()
    if edit_meta:
        edit_meta(meta)
    recs = _records(folder)
    if edit_records:
        edit_records(recs)
    store.rewrite(recs)
    store.write_meta(meta)  # after the lines: meta.json seals their set


@pytest.fixture(scope="module")
def small_ledger(default_grid, tmp_path_factory):
    """Eight runs of the default grid, as an unfinished grid of the same publisher (sealed by
    the session's key): cheap to copy and verify."""
    folder = tmp_path_factory.mktemp("small") / "ledger"
    (folder / "runs").mkdir(parents=True)
    shutil.copy(default_grid / "meta.json", folder / "meta.json")
    recs = _records(default_grid)[:8]
    for r in recs:
        shutil.copytree(default_grid / "runs" / r["run_id"], folder / "runs" / r["run_id"])
    (folder / "runs.jsonl").touch()
    _reseal(folder, load_key(), lambda m: m.update(finished=None), lambda rs: rs.extend(recs))
    return folder


def _cell_args() -> list[str]:
    """A builder task, untreated: the cell every default model and every fault model runs in."""
    task = next(t.id for t in in_suite(load_tasks(), "default").values() if t.role == "builder")
    clean = next(c.name for c in load_content_conditions().values() if c.carries is None)
    none = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    return ["--tasks", task, "--content", clean, "--swap", none]


def test_a_hostile_ledger_runs_nothing(small_ledger, plain_venvs, tmp_path, capsys):
    folder = _copy(small_ledger, tmp_path / "hostile")
    marker = tmp_path / "MARKER"
    evil = tmp_path / "shipped" / "evil.py"  # published beside the ledger (inside it, it is refused below)
    evil.parent.mkdir()
    evil.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from claimgrid.reference import Turn, reference_model\n"
        "@reference_model('evil', behaviour='x')\ndef evil(script, messages):\n    return Turn(content='')\n"
    )
    import hashlib

    sha = hashlib.sha256(evil.read_bytes()).hexdigest()

    def point_at_evil(meta):
        meta["policies"] = [str(evil)]
        meta["policy_files"] = [{"path": str(evil), "sha256": sha, "models": ["evil"]}]

    _reseal(folder, load_key(tmp_path / "attacker.pem"), point_at_evil)  # sealed by its author: it verifies
    other = tmp_path / "elsewhere" / "evil.py"  # the reader's own file of that name, other bytes
    other.parent.mkdir()
    other.write_text("x = 1\n")
    cases = [
        (["reclassify", str(folder)], 2, ["reference model(s) evil", str(evil), "--policies"]),
        (["reclassify", str(folder), "--policies", str(other)], 2, [str(other), "differs", sha[:16], "evil"]),
        (["run", "--resume", str(folder), "--venvs", str(plain_venvs)], 2, ["reference model(s) evil", str(evil)]),
        (
            ["replay", str(folder), "--venvs", str(plain_venvs), "--out", str(tmp_path / "rp")],
            2,
            ["reference model(s) evil", str(evil)],
        ),
        (["compare", str(small_ledger), str(folder), "--out", str(tmp_path / "cmp")], 0, ["grid fact policy_files"]),
    ]
    before = (folder / "runs.jsonl").read_bytes()
    for argv, code, names in cases:
        capsys.readouterr()
        assert main(argv) == code, argv
        out, err = capsys.readouterr()
        assert all(n in out + err for n in names), (argv, out, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1, err
        assert not marker.exists(), f"{argv} executed a file shipped in the ledger"
    assert (folder / "runs.jsonl").read_bytes() == before
    assert not (tmp_path / "rp").exists()
    # Shipped inside the ledger folder, the file is an unknown name: every reader refuses the
    # folder before reading anything of it (claimgrid.store.inert.check_folder).
    inside = folder / "evil.py"
    shutil.copy(evil, inside)
    for argv in (
        ["reclassify", str(folder), "--policies", str(inside)],
        ["compare", str(small_ledger), str(folder), "--out", str(tmp_path / "cmp2")],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"{inside}: an unknown name in a ledger folder" in err and len(err.strip().splitlines()) == 1, err
        assert not marker.exists()
    assert (folder / "runs.jsonl").read_bytes() == before


def _flip_in(path: Path, needle: str) -> None:
    """One byte of ``path`` changed: the letter after the first ``needle``, JSON stays valid."""
    data = path.read_bytes()
    at = data.index(needle.encode()) + len(needle)
    path.write_bytes(data[:at] + (b"X" if data[at : at + 1] != b"X" else b"Y") + data[at + 1 :])


def _run_dir(folder: Path, n: int) -> tuple[str, Path]:
    run_id = _records(folder)[n]["run_id"]
    return run_id, folder / "runs" / run_id


TAMPER = [
    # (what is changed, edit(folder) -> the words that must name it)
    ("meta.json", lambda d: (_flip_in(d / "meta.json", '"python": "'), ["meta.json: signature does not match"])[1]),
    (
        "a runs.jsonl line",
        lambda d: (
            _flip_in_line(d / "runs.jsonl", 3, '"claim_vs_outcome": "'),
            [f"runs.jsonl line 3 (run {_records(d)[2]['run_id']}): signature does not match"],
        )[1],
    ),
    (
        "a manifest",
        lambda d: (
            _flip_in(_run_dir(d, 4)[1] / "manifest.json", '": "'),
            [
                f"runs/{_run_dir(d, 4)[0]}/manifest.json: signature does not match",
                f"run {_run_dir(d, 4)[0]}: tampered manifest.json",
            ],
        )[1],
    ),
    (
        "an events.jsonl",
        lambda d: (
            _flip_in(_run_dir(d, 1)[1] / "events.jsonl", '"source": "'),
            [f"run {_run_dir(d, 1)[0]}: tampered events.jsonl"],
        )[1],
    ),
    (
        "a cassette",
        lambda d: (
            _flip_in(_run_dir(d, 6)[1] / "gateway.jsonl", '"model": "'),
            [f"run {_run_dir(d, 6)[0]}: tampered gateway.jsonl"],
        )[1],
    ),
]


def _flip_in_line(path: Path, line: int, needle: str) -> None:
    lines = path.read_bytes().split(b"\n")
    at = lines[line - 1].index(needle.encode()) + len(needle)
    row = lines[line - 1]
    lines[line - 1] = row[:at] + (b"X" if row[at : at + 1] != b"X" else b"Y") + row[at + 1 :]
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("case", TAMPER, ids=[c[0] for c in TAMPER])
def test_one_byte_changed_is_refused_naming_it(small_ledger, plain_venvs, tmp_path, capsys, case):
    folder = _copy(small_ledger, tmp_path / "ledger")
    names = case[1](folder)
    before = (folder / "runs.jsonl").read_bytes()
    for argv in (
        ["reclassify", str(folder)],
        ["run", "--resume", str(folder), "--venvs", str(plain_venvs)],
        ["compare", str(small_ledger), str(folder), "--out", str(tmp_path / "cmp")],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert all(n in err for n in names), (argv, err)
        assert (folder / "runs.jsonl").read_bytes() == before  # nothing rewritten
    assert not (tmp_path / "cmp").exists()


@pytest.fixture(scope="module")
def changed_plain(tmp_path_factory):
    """A venvs.toml whose ``plain`` runs a changed adapter: it drops the model's final answer
    (the framework "ends silently"); same project, same versions, same name."""
    base = tmp_path_factory.mktemp("changed-plain")
    src = (ROOT / "frameworks" / "plain" / "adapter.py").read_text()
    old = 'kit.final_message(rec, agent, msg.get("content") or "")\n            return msg.get("content")'
    assert old in src
    (base / "adapter.py").write_text(src.replace(old, 'kit.final_message(rec, agent, "")\n            return ""'))
    venvs = base / "venvs.toml"
    venvs.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\nadapter = "{base}/adapter.py"\n'
    )
    return venvs


def test_compare_lists_exactly_the_changed_cells(default_grid, changed_plain, tmp_path, capsys):
    assert main(["compare", str(default_grid), str(default_grid), "--out", str(tmp_path / "self")]) == 0
    same = json.loads((tmp_path / "self" / "compare.json").read_text())
    assert same["identical_cells"] == same["cells_in_both"] == len(_records(default_grid))
    assert not (same["changed"] or same["only_in_a"] or same["grid_facts"])

    # Two models of one cell of A: one whose run ends with a final answer (the change reaches
    # it) and one whose run has none (the change cannot reach it), read from A's evidence.
    args = _cell_args()
    cell = dict(zip(("task", "content", "swap"), args[1::2]))
    reached, unreached = {}, {}
    for r in _records(default_grid):
        if all(r[k] == v for k, v in cell.items()):
            events = read_events(default_grid / "runs" / r["run_id"] / "events.jsonl")
            final = any(e.get("kind") == "message" and e.get("role") == "assistant" and e.get("text") for e in events)
            (reached if final else unreached).setdefault(r["model"], r["run_id"])
    assert reached and unreached, "the cell should hold runs with and without a final answer"
    models = [next(iter(reached)), next(iter(unreached))]
    b = tmp_path / "b"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(changed_plain),
                "--out",
                str(b),
                *args,
                "--models",
                ",".join(models),
                "--substitute",
                default_substitute(),
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["compare", str(default_grid), str(b), "--out", str(tmp_path / "cmp")]) == 1
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    a_by_id = {r["run_id"]: r for r in _records(default_grid)}
    reached = {reached[models[0]]}
    changed = {
        "plain.{task}.{content}.{swap}".format(**c["cell"]) + f".{c['cell']['model']}" for c in result["changed"]
    }
    assert changed == {".".join(i.split(".")[:5]) for i in reached}
    for c in result["changed"]:
        run_id = next(i for i in reached if i.startswith(f"plain.{c['cell']['task']}") and c["cell"]["model"] in i)
        assert {d["field"] for d in c["fields"]} >= {"classification.claim_verdict"}
        assert c["evidence"]["a"] == str(default_grid.resolve() / "runs" / run_id)
        assert c["evidence"]["b"] == str(b.resolve() / "runs" / run_id)
        assert f"changed: framework=plain task={c['cell']['task']}" in out
        assert all(
            d["a"] == a_by_id[run_id]["classification"][d["field"].split(".", 1)[1]]
            for d in c["fields"]
            if d["field"].startswith("classification.")
        )
    assert len(result["only_in_a"]) == len(_records(default_grid)) - len(_records(b)) and not result["only_in_b"]
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "## Changed cells" in md and "claim_verdict" in md
    _resume_rederives(b, changed_plain, tmp_path, capsys)


def _resume_rederives(b: Path, venvs: Path, tmp_path: Path, capsys) -> None:
    """A line that disagrees with its evidence, signed by the publisher's own key, is not
    republished by --resume: the classification is derived again from the evidence."""
    folder = _copy(b, tmp_path / "forged")
    truth = _records(b)
    victim = truth[0]["run_id"]

    def forge(recs):
        recs[0]["classification"]["claim_vs_outcome"] = (
            "TRUE_SUCCESS" if (recs[0]["classification"]["claim_vs_outcome"] != "TRUE_SUCCESS") else "FALSE_SUCCESS"
        )

    _reseal(folder, load_key(), edit_records=forge)  # the session's key: the publisher's
    capsys.readouterr()
    assert main(["run", "--resume", str(folder), "--venvs", str(venvs), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "classified again from their evidence" in out and victim in out
    assert [r["classification"] for r in _records(folder)] == [r["classification"] for r in truth]
