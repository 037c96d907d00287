"""The ``late`` tool fault in the harness tool layer: the tool does its work at once, its event
is sent at once, and its (right) result reaches the framework only after the delay the driver
handed it (``ctl["tool_fault"]["delay_s"]``)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "frameworks" / "_harness"))

import harness_tools as ht  # noqa: E402

DELAY_S = 0.4  # the driver's figure in a grid is the per-call deadline + 1 s; short here


def test_a_late_result_is_the_right_one_returned_after_the_delay(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    ctl = {
        "workspace": str(ws),
        "sandbox": str(tmp_path),
        "budgets": {"command_timeout_s": 5},
        "command_sandbox": None,
        "tool_fault": {"kind": "late", "categories": ["write"], "delay_s": DELAY_S},
    }
    channel = ht.ToolChannel(None)
    tools = {t.name: t for t in ht.make_tools(ctl, channel)}
    got: dict = {}

    def call():
        t0 = time.monotonic()
        got["result"] = tools["write_file"](path="out.txt", content="hello\n")
        got["s"] = time.monotonic() - t0

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(DELAY_S / 2)
    # Mid-wait: the write is done and recorded, the framework has nothing yet.
    assert worker.is_alive() and (ws / "out.txt").read_text() == "hello\n" and len(channel.events) == 1
    worker.join(10)
    (event,) = channel.events
    assert got["s"] >= DELAY_S and got["result"] == event["result"] and not got["result"].startswith("ERROR")
    assert (event["fault"], event["delayed_s"], event["ok"], event["changed_workspace"]) == (
        "late",
        DELAY_S,
        True,
        True,
    )
    # Taken once: the next call of the category is neither delayed nor marked.
    t0 = time.monotonic()
    tools["write_file"](path="out2.txt", content="x\n")
    assert time.monotonic() - t0 < DELAY_S and "fault" not in channel.events[-1]
