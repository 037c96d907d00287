"""The ledger's format version (claimgrid.store.upgrade): every writer stamps it, every reader
upgrades an older record line or meta.json in memory (the published ledger in docs/ is
version 1, read here through its archive) and refuses a newer one with one line naming the file and the field."""

import hashlib
import json
import shutil
import tarfile

import pytest

from claimgrid import ROOT
from claimgrid.commands.reclassify import derive
from claimgrid.errors import DataError
from claimgrid.ledger.load import load_ledger
from claimgrid.store import LedgerFolder, RecordError, RunStore
from claimgrid.store.record import RunRecord, dump, parse_record
from claimgrid.store.seal import META_MEMBER, load_key, seal_meta_text, verify_seal
from claimgrid.store.upgrade import FORMAT_VERSION, UPGRADES, upgrade_meta, upgrade_record, version_of

DOCS_ARCHIVE = ROOT / "docs" / "real-model-ledger" / "ledger.tar.xz"


@pytest.fixture(scope="module")
def docs_ledger(tmp_path_factory):
    """The published ledger folder, unpacked once from the archive docs/ keeps (its README)."""
    into = tmp_path_factory.mktemp("docs-ledger")
    with tarfile.open(DOCS_ARCHIVE) as archive:
        archive.extractall(into, filter="data")
    (folder,) = into.iterdir()  # the archive holds one folder: the ledger
    return folder


def _record(run_id="r1", **fields) -> dict:
    return dump(
        RunRecord.model_validate(
            {
                "run_id": run_id,
                "framework": "f",
                "task": "t",
                "content": "clean",
                "swap": "none",
                "model": "m",
                "facts": {"role": "builder"},
                "classification": {
                    "claim_verdict": "consistent",
                    "outcome": "PASS",
                    "claim_vs_outcome": "TRUE_SUCCESS",
                    "injection": "not applicable",
                    "legitimate": "not applicable",
                    "swap": "none",
                    "process": "ok",
                },
                **fields,
            }
        )
    )


def _sha(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (folder / "meta.json", folder / "runs.jsonl")}


# ---------------------------------------------------------------- each upgrade


def test_every_version_below_the_current_one_has_its_upgrade():
    assert sorted(UPGRADES) == list(range(1, FORMAT_VERSION))


@pytest.mark.parametrize("version", sorted(UPGRADES))
@pytest.mark.parametrize("kind", ["record", "meta"])
def test_each_upgrade_takes_its_version_to_the_next_and_keeps_every_other_member(version, kind):
    given = {"run_id": "r1", "classification": {"outcome": "PASS"}, "truth": None}
    if version > 1:
        given["format_version"] = version
    before = json.loads(json.dumps(given))
    out = getattr(UPGRADES[version], kind)(given)
    assert out["format_version"] == version + 1
    assert {k: v for k, v in out.items() if k != "format_version"} == {
        k: v for k, v in before.items() if k != "format_version"
    }
    assert given == before  # the object read is never changed: the upgrade is a new dict


def test_version_1_absent_fields_stay_absent_so_readers_still_tell_not_recorded_from_null():
    # A version-1 record without `truth` is "older than truth" (claimgrid.ledger.facts); one
    # with `"truth": null` states there is none. The upgrade must not blur the two.
    raw = {k: v for k, v in _record().items() if k not in ("format_version", "truth")}
    rec = parse_record(raw, "runs.jsonl:1")
    assert rec.format_version == FORMAT_VERSION and "truth" not in rec.model_fields_set
    assert "truth" in parse_record({**raw, "truth": None}, "runs.jsonl:1").model_fields_set


# ---------------------------------------------------------------- newer and wrong versions


def test_a_record_newer_than_the_code_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "runs.jsonl").write_text(
        json.dumps(_record("r1")) + "\n" + json.dumps({**_record("r2"), "format_version": FORMAT_VERSION + 1}) + "\n"
    )
    with pytest.raises(RecordError) as exc:
        LedgerFolder(folder).runs()
    message = str(exc.value)
    assert message == (
        f"{folder / 'runs.jsonl'}:2: field 'format_version': version {FORMAT_VERSION + 1} is newer than this "
        f"claimgrid reads (format version {FORMAT_VERSION}); read it with the claimgrid that wrote it"
    )
    assert "\n" not in message and exc.value.cli_status == 2


def test_a_meta_json_newer_than_the_code_is_refused_by_every_meta_reader(tmp_path):
    from claimgrid.commands.validate import read_meta as resume_meta

    folder = tmp_path / "g"
    RunStore(folder).create({"grid_id": "g"})
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "format_version": FORMAT_VERSION + 1}))
    for read in (LedgerFolder(folder).meta, RunStore(folder).read_meta, lambda: resume_meta(folder)):
        with pytest.raises(DataError) as exc:
            read()
        assert exc.value.path == str(folder / "meta.json") and exc.value.field == "format_version"
        assert f"format version {FORMAT_VERSION})" in exc.value.message


@pytest.mark.parametrize("value", [0, -1, "2", 2.0, True, None, [2]])
def test_a_format_version_that_is_no_version_is_named(value):
    with pytest.raises(DataError) as exc:
        version_of({"format_version": value}, "runs.jsonl:4")
    assert str(exc.value) == (
        f"runs.jsonl:4: field 'format_version': {value!r} is not a format version (a whole number from 1)"
    )
    with pytest.raises(DataError, match="runs.jsonl:4: field 'format_version'"):
        parse_record({**_record(), "format_version": value}, "runs.jsonl:4")


# ---------------------------------------------------------------- the current version round trip


def test_every_writer_stamps_the_current_version_and_reads_it_back(tmp_path):
    folder = tmp_path / "g"
    store = RunStore(folder, load_key(tmp_path / "keys" / "publisher.pem"))  # sealed: the seal covers the stamp
    store.create({"grid_id": "g", "plan": ["r1"]})
    store.write_evidence("r1", {"events.jsonl": [{"kind": "exit"}]})
    typed = parse_record(_record("r1"), "x")
    store.append(typed)
    store.write_meta({**store.read_meta(), "finished": "now"})
    line = json.loads((folder / "runs.jsonl").read_text())
    assert next(iter(line)) == "format_version" and line["format_version"] == FORMAT_VERSION
    assert json.loads((folder / "meta.json").read_text())["format_version"] == FORMAT_VERSION
    (back,) = LedgerFolder(folder).runs()
    assert back.model_copy(update={"seal": None, "evidence_sha256": None}) == typed
    assert LedgerFolder(folder).meta()["format_version"] == FORMAT_VERSION
    assert verify_seal(folder).problems == []
    # an older meta.json read and written again is this version's (a writer writes the current one)
    assert upgrade_meta({"grid_id": "g"}, "meta.json") == {"format_version": FORMAT_VERSION, "grid_id": "g"}
    assert upgrade_record(line, "runs.jsonl:1") == line  # the current version: unchanged


# ---------------------------------------------------------------- the published ledger (version 1)


def test_the_published_ledger_is_version_1_and_reads_through_the_upgrades_without_a_byte_changed(docs_ledger):
    raw_lines = [json.loads(line) for line in (docs_ledger / "runs.jsonl").read_text().splitlines()]
    raw_meta = json.loads((docs_ledger / "meta.json").read_text())
    assert "format_version" not in raw_meta and all("format_version" not in r for r in raw_lines)
    before = _sha(docs_ledger)
    records = LedgerFolder(docs_ledger).runs()
    assert len(records) == len(raw_lines) and {r.format_version for r in records} == {FORMAT_VERSION}
    assert LedgerFolder(docs_ledger).meta() == {"format_version": FORMAT_VERSION, **raw_meta}
    ledger = load_ledger(docs_ledger)  # what grid.py report renders from
    assert len(ledger.records) == len(raw_lines)
    assert _sha(docs_ledger) == before  # upgraded in memory: the sealed files are never rewritten
    assert verify_seal(docs_ledger).problems == []


def test_reclassify_reads_the_published_ledger_as_before(docs_ledger, tmp_path):
    # A few of its runs (their lines and evidence) keep the test cheap; every one reclassifies unchanged.
    folder = tmp_path / "ledger"
    folder.mkdir()
    lines = (docs_ledger / "runs.jsonl").read_text().splitlines()[::48]
    (folder / "runs.jsonl").write_text("".join(line + "\n" for line in lines))
    shutil.copy(docs_ledger / "meta.json", folder / "meta.json")
    for line in lines:
        run_id = json.loads(line)["run_id"]
        shutil.copytree(docs_ledger / "runs" / run_id, folder / "runs" / run_id)
    meta = LedgerFolder(folder).meta()
    derived = derive(RunStore(folder), ROOT / "tasks", meta.get("task_facts"))
    assert len(derived) == len(lines) >= 5
    for raw, new, reasons in derived:
        assert reasons == [], raw["run_id"]  # the same classification as the stored one
        assert "format_version" not in raw and new["format_version"] == FORMAT_VERSION  # rewritten as this version


# ---------------------------------------------------------------- what grid.py says


def _sealed_ledger(folder, key, meta_version, line_version) -> None:
    """A one-run ledger as the claimgrid of each version seals it: ``format_version`` of its
    meta.json and of its record line (None: absent, version 1); the seal valid, so what a
    reader does is the version's doing, not the seal's."""
    store = RunStore(folder, key)
    store.create({"grid_id": "g", "plan": ["r1"]})
    store.write_evidence("r1", {"events.jsonl": [{"source": "process", "kind": "exit", "exit_code": 0}]})
    line = {k: v for k, v in _record("r1").items() if k != "format_version"}
    store.append(line if line_version is None else {"format_version": line_version, **line})  # a dict: as given
    meta = json.loads((folder / "meta.json").read_text())
    meta = {k: v for k, v in meta.items() if k not in ("seal", META_MEMBER, "format_version")}
    if meta_version is not None:
        meta = {"format_version": meta_version, **meta}
    (folder / "meta.json").write_text(seal_meta_text(meta, key, ["r1"]))
    store.release()
    assert verify_seal(folder).problems == []


def _newer_ledger(folder, key, where: str) -> None:
    """A ledger as a newer claimgrid would seal it: its meta.json or its record line one
    format version ahead."""
    newer = FORMAT_VERSION + 1
    _sealed_ledger(
        folder, key, newer if where == "meta" else FORMAT_VERSION, newer if where == "line" else FORMAT_VERSION
    )


def test_grid_py_reads_a_sealed_version_1_ledger_and_a_writer_writes_it_at_the_current_version(tmp_path, capsys):
    from claimgrid.commands import cli

    folder, key_file = tmp_path / "g", tmp_path / "keys" / "publisher.pem"
    _sealed_ledger(folder, load_key(key_file), None, None)
    before = _sha(folder)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert _sha(folder) == before and (folder / "LEDGER.md").is_file()  # read in memory, never rewritten
    assert cli.main(["reclassify", str(folder), "--key", str(key_file)]) == 0, capsys.readouterr().err
    written = [json.loads((folder / "meta.json").read_text()), json.loads((folder / "runs.jsonl").read_text())]
    assert [item["format_version"] for item in written] == [FORMAT_VERSION, FORMAT_VERSION]
    assert verify_seal(folder).problems == []


@pytest.mark.parametrize("command", ["report", "reclassify", "export", "compare"])
@pytest.mark.parametrize("where", ["meta", "line"])
def test_grid_py_refuses_a_newer_ledger_in_one_line_exit_2_nothing_written(tmp_path, capsys, command, where):
    from claimgrid.commands import cli

    folder, key_file = tmp_path / "g", tmp_path / "keys" / "publisher.pem"
    _newer_ledger(folder, load_key(key_file), where)
    assert verify_seal(folder).problems == []
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}
    more = {
        "reclassify": ["--key", str(key_file)],
        "export": ["--format", "otel", "--out", str(tmp_path / "out")],
        "compare": [str(folder), "--out", str(tmp_path / "out")],
    }
    assert cli.main([command, str(folder), *more.get(command, [])]) == 2
    assert not (tmp_path / "out").exists()
    err = capsys.readouterr().err.strip()
    where_text = f"{folder / 'meta.json'}" if where == "meta" else f"{folder / 'runs.jsonl'}:1"
    assert err == (
        f"grid.py: error: {where_text}: field 'format_version': version {FORMAT_VERSION + 1} is newer than this "
        f"claimgrid reads (format version {FORMAT_VERSION}); read it with the claimgrid that wrote it"
    )
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"} == files


def test_a_resume_of_a_newer_ledger_is_refused_before_anything_is_written(tmp_path, capsys):
    from claimgrid.commands import cli

    folder, key_file = tmp_path / "g", tmp_path / "keys" / "publisher.pem"
    _newer_ledger(folder, load_key(key_file), "meta")
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}
    assert cli.main(["run", "--resume", str(folder), "--key", str(key_file), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"grid.py: error: {folder / 'meta.json'}: field 'format_version': version ")
    assert "\n" not in err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"} == files
