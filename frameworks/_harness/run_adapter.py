"""Fresh-mode entry point: one interpreter per run (the reference isolation mode).

    <venv python> frameworks/_harness/run_adapter.py --adapter-dir frameworks/<name> --tools-fd N

Reads the control JSON from stdin (never from a file or the environment, so the run
token lives only in this process's memory), imports ``adapter.py`` from the adapter
dir, runs it and writes the outcome JSON to ``ctl["outcome_path"]``. Exit code 0 when
an outcome was written (even one carrying the adapter's error); 2 for a bad command
line or control; 3 when the outcome could not be written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness_runtime import harden_process, load_adapter, run_one  # noqa: E402
from harness_shared.harness_control import check_control  # noqa: E402


def main(argv=None) -> int:
    harden_process()  # first: before anything reads the control (and its token)
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter-dir", required=True)
    ap.add_argument("--tools-fd", type=int, default=None)
    args = ap.parse_args(argv)
    if args.tools_fd is not None:
        os.set_inheritable(args.tools_fd, False)
    try:
        ctl = json.loads(sys.stdin.read())
        check_control(ctl)  # a ControlError is a ValueError: one line, exit 2
    except (ValueError, UnicodeDecodeError) as exc:
        print(f"harness: bad control JSON on stdin: {exc}", file=sys.stderr)
        return 2
    adapter, adapter_error = None, None
    try:
        adapter = load_adapter(args.adapter_dir)
        # Same imports as a warm child has had before its run: the two modes must agree.
        preload = getattr(adapter, "preload", None)
        if preload is not None:
            preload()
    except BaseException as exc:  # noqa: BLE001 - recorded as the run's error
        adapter_error = exc
    return run_one(ctl, adapter, args.tools_fd, "fresh", adapter_error)


if __name__ == "__main__":
    code = main()
    # The outcome is on disk: skip interpreter shutdown, which costs CrewAI 3-5 s
    # (event-bus and atexit handlers) and decides nothing about the run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
