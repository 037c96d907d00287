"""A ledger folder is inert data (claimgrid.store.inert): every write goes through a new
temporary, a planted symlink/FIFO/unknown name is refused before anything is written, names
from ledger data are slugs, nothing is deleted, and a group of writes lands whole or not at all."""

import os

import pytest

from claimgrid.store import RunStore
from claimgrid.store.inert import (
    AllOrNothing,
    UnsafeFolder,
    check_folder,
    open_lock,
    output_folder,
    outside_ledgers,
    quarantine,
    slug,
    write_file,
)


@pytest.fixture
def ledger(tmp_path):
    store = RunStore(tmp_path / "ledger")
    store.create({"grid_id": "g"})
    store.write_evidence("r1", {"events.jsonl": [{"kind": "exit"}]})
    store.append({"run_id": "r1"})
    store.release()
    return store.folder


@pytest.fixture
def outside(tmp_path):
    target = tmp_path / "outside.txt"
    target.write_bytes(b"untouched")
    return target


@pytest.mark.parametrize("name", ["LEDGER.md", "meta.json", ".lock", "runs.jsonl", ".LEDGER.md.abc.tmp"])
def test_a_symlink_at_a_known_name_is_refused_and_not_followed(ledger, outside, name):
    (ledger / name).unlink(missing_ok=True)
    (ledger / name).symlink_to(outside)
    with pytest.raises(UnsafeFolder, match=f"{name}: is a symlink"):
        check_folder(ledger)
    with pytest.raises(UnsafeFolder):
        write_file(ledger / name, "forged")
    assert outside.read_bytes() == b"untouched"


def test_a_fifo_a_device_an_unknown_name_or_a_linked_run_folder_is_refused(ledger, outside, tmp_path):
    os.mkfifo(ledger / "RUNS.md")
    with pytest.raises(UnsafeFolder, match="RUNS.md: is a FIFO"):
        check_folder(ledger)
    (ledger / "RUNS.md").unlink()
    (ledger / "site.pth").write_text("import os")
    with pytest.raises(UnsafeFolder, match="site.pth: an unknown name") as exc:
        check_folder(ledger)
    assert "not a regular file" not in str(exc.value) and "a file claimgrid does not write there" in str(exc.value)
    (ledger / "site.pth").unlink()
    # a published ledger's folder in docs/ (the archive and its notes) is named for what it is
    packed = tmp_path / "published"
    packed.mkdir()
    for name in ("ledger.tar.xz", "README.md", "LEDGER.md"):
        (packed / name).write_text("x")
    with pytest.raises(UnsafeFolder) as exc:
        check_folder(packed)
    assert str(exc.value).startswith(f"{packed}: holds a packed ledger (ledger.tar.xz), not a ledger folder: unpack")
    (ledger / "runs" / "r2").symlink_to(tmp_path)
    with pytest.raises(UnsafeFolder, match="r2: is a symlink, not an evidence folder"):
        check_folder(ledger)
    (ledger / "runs" / "r2").unlink()
    (ledger / "runs" / "r1" / "RUN.md").symlink_to(outside)
    with pytest.raises(UnsafeFolder, match="RUN.md: is a symlink"):
        check_folder(ledger)
    (ledger / "runs" / "r1" / "RUN.md").unlink()
    os.mkfifo(ledger / "runs" / "r1" / "stderr.txt")  # a reader would hang on it
    with pytest.raises(UnsafeFolder, match="stderr.txt: is a FIFO"):
        check_folder(ledger)
    (ledger / "runs" / "r1" / "stderr.txt").unlink()
    check_folder(ledger)  # the clean folder passes


def test_write_file_replaces_a_regular_file_through_a_new_temporary(ledger):
    path = write_file(ledger / "LEDGER.md", "one")
    inode = path.stat().st_ino
    write_file(path, "two")
    assert path.read_text() == "two" and path.stat().st_ino != inode
    assert sorted(p.name for p in ledger.iterdir() if p.name.endswith(".tmp")) == []
    with pytest.raises(UnsafeFolder, match="not a plain file name"):
        write_file(ledger / "..", "x")


def test_the_lock_must_be_a_regular_file_the_reader_owns(ledger, outside):
    (ledger / ".lock").unlink()
    (ledger / ".lock").symlink_to(outside)
    with pytest.raises(UnsafeFolder):
        open_lock(ledger / ".lock")
    assert outside.read_bytes() == b"untouched"
    (ledger / ".lock").unlink()
    fd = open_lock(ledger / ".lock")
    os.close(fd)
    if os.getuid() == 0:  # only root can give the file away
        os.chown(ledger / ".lock", 12345, 12345)
        with pytest.raises(UnsafeFolder, match="owned by you"):
            open_lock(ledger / ".lock")


def test_an_output_folder_that_is_a_symlink_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeFolder, match="is a symlink"):
        output_folder(tmp_path / "out")
    assert output_folder(tmp_path / "new" / "deep").is_dir()


@pytest.mark.parametrize("text", ["../../x", "a/b", "..", ".", "", "\0", "é" * 300, "ok/../..", ".hidden"])
def test_a_slug_is_one_bounded_plain_name(text):
    name = slug(text)
    assert "/" not in name and "\0" not in name and ".." not in name and not name.startswith(".") and len(name) <= 80
    assert name == slug(text)  # stable


def test_a_slug_keeps_a_plain_name_and_tells_changed_ones_apart():
    assert slug("diligent") == "diligent"
    assert slug("a/b") != slug("a-b") and slug("a:b") != slug("a-b")
    assert slug("x" * 100) != slug("x" * 101)


def test_all_or_nothing_puts_every_file_back(ledger):
    meta = (ledger / "meta.json").read_bytes()
    with pytest.raises(RuntimeError), AllOrNothing():
        write_file(ledger / "meta.json", "forged")
        write_file(ledger / "reclassify.txt", "new")
        raise RuntimeError("midway")
    assert (ledger / "meta.json").read_bytes() == meta and not (ledger / "reclassify.txt").exists()


def test_quarantine_moves_and_names(ledger):
    moved = quarantine(ledger, [ledger / "runs" / "r1"], stamp="s")
    assert moved == ledger / "quarantine" / "s" and (moved / "runs" / "r1" / "events.jsonl").is_file()
    assert not (ledger / "runs" / "r1").exists()
    check_folder(ledger)  # quarantine/ is one of the folder's own folders


def test_an_output_inside_a_ledger_is_refused(ledger, tmp_path):
    with pytest.raises(UnsafeFolder, match="inside the ledger folder"):
        outside_ledgers(ledger / "runs" / "x", "--out", tmp_path / "other", ledger)
    assert outside_ledgers(tmp_path / "beside", "--out", ledger) == tmp_path / "beside"
