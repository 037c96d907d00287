"""The harness tool layer in-process: path confinement, each tool, measured workspace change,
and run_command both unguarded and inside the real bubblewrap guard."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "frameworks" / "_harness"))

import harness_tools as ht  # noqa: E402

from claimgrid.inputs.tasks import ensure_task_envs, in_suite, load_tasks  # noqa: E402
from claimgrid.launch.confine import command_sandbox, hand_over  # noqa: E402
from claimgrid.sandbox.guard import detect  # noqa: E402

# The interpreter of a default-suite task, its environment built as grid.py builds it.
_TASK = next(iter(in_suite(load_tasks(), "default").values()))
ensure_task_envs([_TASK])
TASK_PYTHON = _TASK.python


GUARD = detect("on")  # CI runs where namespaces work: the guard must be there


def make_kit(tmp_path, guarded: bool):
    ws = tmp_path / "ws"
    sandbox = tmp_path / "sandbox"
    ws.mkdir()
    sandbox.mkdir()
    os.chmod(ws, 0o777)
    (ws / "src").mkdir(mode=0o777)
    (ws / "src" / "a.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "outside.txt").write_text("secret outside\n")
    guard = GUARD if guarded else None
    hand_over(guard, ws)
    ctl = {
        "workspace": str(ws),
        "sandbox": str(sandbox),
        "budgets": {"command_timeout_s": 5, "max_output_chars": 2000},
        "command_sandbox": command_sandbox(guard, ws, TASK_PYTHON, 5),
    }
    channel = ht.ToolChannel(None)
    tools = {t.name: t for t in ht.make_tools(ctl, channel)}
    return ws, tools, channel


@pytest.fixture(params=["guarded", "unguarded"])
def kit(tmp_path, request):
    return make_kit(tmp_path, request.param == "guarded")


def last(channel):
    return channel.events[-1]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "src/../../outside.txt", "link/outside.txt", "esc"])
def test_paths_leaving_the_workspace_are_refused(kit, path):
    ws, tools, channel = kit
    os.symlink(ws.parent, ws / "link")
    os.symlink(ws.parent / "outside.txt", ws / "esc")
    result = tools["read_file"](path=path)
    assert result.startswith("ERROR:") and "outside the workspace" in result
    ev = last(channel)
    assert ev["ok"] is False and "outside the workspace" in ev["error"] and ev["tool"] == "read_file"
    assert "secret outside" not in result


def test_write_refused_outside_and_nothing_written(kit):
    ws, tools, channel = kit
    result = tools["write_file"](path="../evil.txt", content="x")
    assert result.startswith("ERROR:")
    assert not (ws.parent / "evil.txt").exists()
    assert last(channel)["changed_workspace"] is False


def test_write_edit_read_search_list(kit):
    ws, tools, channel = kit
    assert "wrote" in tools["write_file"](path="notes/deep/status.md", content="status: ok\n")
    assert (ws / "notes" / "deep" / "status.md").read_text() == "status: ok\n"
    ev = last(channel)
    assert ev["category"] == "write" and ev["changed_workspace"] is True
    assert "notes/deep/status.md" in ev["changed_paths"]

    assert "replaced 1" in tools["edit_file"](path="src/a.py", old="a - b", new="a + b")
    assert (ws / "src" / "a.py").read_text().endswith("return a + b\n")
    assert last(channel)["changed_paths"] == ["src/a.py"]

    missing = tools["edit_file"](path="src/a.py", old="no such text", new="x")
    assert missing.startswith("ERROR:") and last(channel)["ok"] is False
    assert last(channel)["changed_workspace"] is False

    assert "return a + b" in tools["read_file"](path="src/a.py")
    assert tools["search"](pattern=r"return \w") == "src/a.py:2:     return a + b"
    assert "src/a.py:1:" in tools["search"](pattern="def add(", path="src")  # invalid regex -> substring
    listing = tools["list_dir"]().splitlines()
    assert listing == ["notes/", "src/"]
    assert [e["seq"] for e in channel.events] == list(range(len(channel.events)))
    assert {e["category"] for e in channel.events} == {"write", "edit", "read"}


def test_changed_workspace_is_measured_for_commands(kit):
    ws, tools, channel = kit
    out = tools["run_command"](command="ls")
    assert "src" in out and "[exit code 0]" in out
    assert last(channel)["changed_workspace"] is False and last(channel)["exit_code"] == 0
    tools["run_command"](command="echo hi > made.txt")
    ev = last(channel)
    assert ev["ok"] is True and ev["changed_workspace"] is True and ev["changed_paths"] == ["made.txt"]
    tools["run_command"](command="exit 3")
    assert last(channel)["ok"] is True and last(channel)["exit_code"] == 3


def test_bad_arguments_and_unknown_tools_are_events(kit):
    ws, tools, channel = kit
    assert tools["read_file"]().startswith("ERROR: missing required")
    assert tools["read_file"](path="src/a.py", mode="rb").startswith("ERROR: unknown argument")
    assert tools["write_file"](path="x", content=5).startswith("ERROR:")
    assert ht.call_tool(list(tools.values()), "delete_repo", {"path": "."}).startswith("ERROR: unknown tool")
    evs = channel.events[-4:]
    assert all(e["ok"] is False for e in evs)
    assert evs[-1]["tool"] == "delete_repo" and evs[-1]["category"] == "unknown"


def test_command_timeout_kills_the_process_group(kit, tmp_path):
    ws, tools, channel = kit
    ctx = tools["run_command"]._ctx
    ctx.commands.timeout_s = 0.5
    marker = ws / "late.txt"
    out = tools["run_command"](command="(sleep 1.5; echo late > late.txt) & sleep 30")
    ev = last(channel)
    assert ev["ok"] is False and "timed out" in ev["error"] and "timed out" in out
    import time

    time.sleep(2)
    assert not marker.exists()  # the background child died with its group


def test_output_truncated_to_budget(kit):
    ws, tools, channel = kit
    out = tools["run_command"](command="head -c 5000 /dev/zero | tr '\\0' a")
    assert "truncated" in out and len(out) < 2200
    assert last(channel)["result_chars"] == len(out)


def test_channel_writes_json_lines_to_a_pipe(tmp_path):
    r, w = os.pipe()
    channel = ht.ToolChannel(w)
    assert os.get_inheritable(w) is False
    (tmp_path / "ws").mkdir()
    tools = ht.make_tools({"workspace": str(tmp_path / "ws"), "tools": ["list_dir"]}, channel)
    assert [t.name for t in tools] == ["list_dir"]
    tools[0](path=".")
    channel.close()
    data = os.read(r, 65536).decode()
    os.close(r)
    (ev,) = [json.loads(line) for line in data.splitlines()]
    assert ev["source"] == "tools" and ev["tool"] == "list_dir" and ev["seq"] == 0


def test_a_link_removed_while_it_is_resolved_is_a_refusal_not_a_crash(tmp_path, monkeypatch):
    """The swap race's narrowest window: the walk has seen a symlink and the link is gone
    before its target is read (once in CI, 2026-12-06: the refusal was a FileNotFoundError)."""
    import workspace_jail

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "d").symlink_to("real")
    jail = workspace_jail.Jail(str(ws))

    def gone(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(workspace_jail.os, "readlink", gone)
    with pytest.raises(workspace_jail.ToolRefused, match="changed while it was resolved"):
        jail.write_bytes("d/x.txt", b"x")


def test_an_entry_removed_between_its_walk_and_its_stat_is_missing(tmp_path, monkeypatch):
    """``kind`` resolves the path, then stats the last name: the agent's own process may
    remove it in between. That is "missing", as it would be a moment later, not a crash."""
    import workspace_jail

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("x")
    jail = workspace_jail.Jail(str(ws))
    assert jail.kind("f.txt") == "file"
    real_stat = workspace_jail.os.stat

    def removed_first(name, *args, **kwargs):
        if kwargs.get("dir_fd") is not None and name == "f.txt":
            os.unlink(name, dir_fd=kwargs["dir_fd"])
        return real_stat(name, *args, **kwargs)

    monkeypatch.setattr(workspace_jail.os, "stat", removed_first)
    assert jail.kind("f.txt") == "missing"
    assert not (ws / "f.txt").exists()
