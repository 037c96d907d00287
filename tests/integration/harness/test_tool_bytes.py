"""Any bytes through the real harness tool layer, and its bounds (Hypothesis for the
property part; the example count is the profile's, tests/conftest.py).

* arbitrary file names (any bytes but ``/`` and NUL: invalid UTF-8, tabs, quotes,
  newlines, control characters) and arbitrary tool arguments (lone surrogates included)
  never make a tool raise: each call returns text and sends exactly one event on a real
  pipe, and the event read back on the driver's side is the event the tool layer kept;
* bounds: a flood is cut to head + tail and counted, read_file of a 255 MB sparse file reads
  only its cap, a backtracking search pattern stops at the time cap, calls past the run's
  tool-call cap are refused without running and counted, a 1,200-level tree and a path past
  PATH_MAX are a recorded snapshot cut, and claimgrid.anybytes.remove_tree removes them.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "frameworks" / "_harness"))

import command_sandbox  # noqa: E402
import harness_tools as ht  # noqa: E402
import tool_specs  # noqa: E402

from claimgrid import caps  # noqa: E402
from claimgrid.anybytes import remove_tree  # noqa: E402

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)
NAME = st.binary(min_size=1, max_size=24).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


def make(tmp_path: Path, **budgets):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    os.chmod(ws, 0o777)  # unguarded as root, commands run as nobody
    (tmp_path / "sandbox").mkdir(exist_ok=True)
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, 1031, 1 << 20)  # F_SETPIPE_SZ: room for a test's events, read after its calls
    ctl = {
        "workspace": str(ws),
        "sandbox": str(tmp_path / "sandbox"),
        "budgets": {"command_timeout_s": 10, "max_output_chars": 16000, **budgets},
        "command_sandbox": None,
    }
    channel = ht.ToolChannel(write_fd)
    tools = {t.name: t for t in ht.make_tools(ctl, channel)}
    return ws, tools, channel, read_fd


def drain(read_fd: int) -> list[dict]:
    os.set_blocking(read_fd, False)
    data = b""
    try:
        while chunk := os.read(read_fd, 1 << 20):
            data += chunk
    except BlockingIOError:
        pass
    return [json.loads(line) for line in data.splitlines()]


def test_the_caps_the_driver_sends_are_the_tool_layers_defaults():
    # One figure each, stated in claimgrid/caps.py; the harness keeps a copy for bare controls.
    b = caps.tool_budgets()
    assert b["command_output_bytes"] == command_sandbox.OUTPUT_KEEP_BYTES
    assert b["read_max_bytes"] == tool_specs.READ_MAX_BYTES
    assert b["edit_max_bytes"] == tool_specs.EDIT_MAX_BYTES
    assert b["search_max_bytes"] == tool_specs.SEARCH_MAX_BYTES
    assert b["search_timeout_s"] == tool_specs.SEARCH_TIMEOUT_S
    assert b["max_tool_calls"] == tool_specs.MAX_TOOL_CALLS


@given(names=st.lists(NAME, min_size=1, max_size=4, unique=True), data=st.binary(max_size=64))
def test_any_file_name_is_listed_read_searched_and_reported(tmp_path_factory, names, data):
    ws, tools, channel, read_fd = make(tmp_path_factory.mktemp("names"))
    for raw in names:
        with open(os.path.join(os.fsencode(ws), raw), "wb") as fh:
            fh.write(data)
        os.chmod(os.path.join(os.fsencode(ws), raw), 0o666)
    texts = [tools["list_dir"](path="."), tools["search"](pattern="x")]
    for raw in names:
        texts.append(tools["read_file"](path=os.fsdecode(raw)))
    # Every name, hidden ones included (a glob skips a leading dot).
    texts.append(tools["run_command"](command="python3 -c 'import os; [os.unlink(n) for n in os.listdir(b\".\")]'"))
    sent = drain(read_fd)
    assert all(isinstance(t, str) for t in texts)
    assert len(sent) == len(texts) == len(channel.events)
    assert sent == json.loads(json.dumps(channel.events))  # the driver reads what the layer kept
    assert sorted(texts[0].split("\n")) == sorted(os.fsdecode(n) for n in names) or any(
        "\n" in os.fsdecode(n) for n in names
    )
    assert sorted(sent[-1]["changed_paths"]) == sorted(os.fsdecode(n) for n in names)
    for _name, event in zip(names, sent[2:-1]):
        assert event["ok"] is True, event  # the real name, decoded losslessly, opens the file


@given(tool=st.sampled_from(sorted(ht.SPECS)), a=ANY_TEXT, b=ANY_TEXT, c=ANY_TEXT)
def test_any_argument_text_never_raises_and_is_one_event(tmp_path_factory, tool, a, b, c):
    ws, tools, channel, read_fd = make(tmp_path_factory.mktemp("args"))
    (ws / "f.txt").write_text("hello\n")
    props = list(ht.SPECS[tool][2])
    args = dict(zip(props, [a, b, c]))
    if tool == "run_command":
        args["command"] = f"printf '%s' {json.dumps(a)} >/dev/null"
    result = tools[tool](**args)
    assert isinstance(result, str)
    [event] = drain(read_fd)
    assert event["tool"] == tool and event["args"] == args  # surrogates included, losslessly


def test_an_output_flood_keeps_head_and_tail_and_counts(tmp_path):
    ws, tools, channel, _ = make(tmp_path, command_output_bytes=4096)
    text = tools["run_command"](command="echo first; head -c 30000000 /dev/zero | tr '\\0' x; echo; echo last")
    event = channel.events[-1]
    assert event["output_bytes"] == len("first\n") + 30_000_000 + len("\nlast\n")
    assert event["output_cut"] is True
    assert text.startswith("first") and "last" in text and "[exit code 0]" in text
    assert len(text) < 6000


def test_a_command_flooding_until_its_timeout_is_cut_and_timed_out(tmp_path):
    ws, tools, channel, _ = make(tmp_path, command_timeout_s=1, command_output_bytes=4096)
    t0 = time.monotonic()
    tools["run_command"](command="cat /dev/zero")
    event = channel.events[-1]
    assert time.monotonic() - t0 < 10
    assert event["timed_out"] is True and event["output_cut"] is True and event["output_bytes"] > 4096


def test_the_output_sink_stays_within_its_size():
    sink = command_sandbox.OutputTail(1000)
    for i in range(10_000):
        sink.add(bytes([65 + i % 26]) * 997)
    assert len(sink.head) + len(sink.tail) <= 1000 and sink.total == 9_970_000 and sink.cut
    assert "9970000 bytes printed" in sink.text()


def test_read_file_of_a_sparse_file_reads_only_its_cap(tmp_path):
    ws, tools, channel, _ = make(tmp_path, read_max_bytes=1 << 16)
    with open(ws / "big.bin", "wb") as fh:
        fh.truncate(255 << 20)
    t0 = time.monotonic()
    text = tools["read_file"](path="big.bin")
    assert time.monotonic() - t0 < 5
    event = channel.events[-1]
    assert event["read_cut"] is True and event["file_bytes"] == 255 << 20
    assert f"file is {255 << 20} bytes" in text


def test_a_backtracking_search_stops_at_its_time_cap(tmp_path):
    ws, tools, channel, _ = make(tmp_path, search_timeout_s=1)
    (ws / "a.txt").write_text("a" * 40 + "b\n")
    t0 = time.monotonic()
    text = tools["search"](pattern="^(a+)+$")
    assert time.monotonic() - t0 < 8
    event = channel.events[-1]
    assert event["ok"] is False and event["search_timed_out"] is True and "time cap" in text
    assert tools["search"](pattern="a+b").startswith("a.txt:1:")  # an ordinary pattern still works


def test_calls_past_the_tool_call_cap_are_refused_and_counted(tmp_path):
    ws, tools, channel, read_fd = make(tmp_path, max_tool_calls=3)
    results = [tools["run_command"](command="echo ran >> log.txt") for _ in range(7)]
    channel.close()
    sent = drain(read_fd)
    assert (ws / "log.txt").read_text().count("ran") == 3  # refused calls never ran
    assert all("cap of 3 tool calls" in r for r in results[3:])
    assert [e["kind"] for e in sent] == ["tool_call"] * 4 + ["limit"]
    assert sent[3]["cap"] == "max_tool_calls" and sent[-1]["refused"] == 4


def test_a_deep_tree_and_a_path_past_path_max_are_a_recorded_cut(tmp_path):
    ws, tools, channel, _ = make(tmp_path)
    cmd = (
        "python3 -c 'import os\n"
        'for top, name, n in (("deep", "d", 1200), ("long", "d" * 12, 400)):\n'
        '    back = os.open(".", os.O_RDONLY); os.mkdir(top); os.chdir(top)\n'
        "    for _ in range(n): os.mkdir(name); os.chdir(name)\n"
        "    os.fchdir(back)'"
    )
    tools["run_command"](command=cmd)
    event = channel.events[-1]
    assert event["ok"] is True and event["changed_workspace"] is True and event["snapshot_cut"]
    assert "deep" in event["changed_paths"] and "long" in event["changed_paths"]
    assert tools["list_dir"](path=".") == "deep/\nlong/"
    assert remove_tree(ws) and not ws.exists()


def test_a_lone_surrogate_path_is_refused_and_an_escaped_byte_path_is_found(tmp_path):
    ws, tools, channel, _ = make(tmp_path)
    with open(os.path.join(os.fsencode(ws), b"\xff.txt"), "wb") as fh:
        fh.write(b"byte name\n")
    assert tools["read_file"](path="\udcff.txt") == "byte name\n"  # the name os.fsdecode gives b"\xff.txt"
    refused = tools["read_file"](path="bad\ud800.txt")
    assert refused.startswith("ERROR:") and "lone surrogate" in refused
    assert [e["ok"] for e in channel.events] == [True, False]
    assert tools["write_file"](path="w.txt", content="x\ud800").startswith("ERROR:")
    assert not (ws / "w.txt").exists()
