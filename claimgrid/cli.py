"""Argument parsing and the commands of grid.py. User errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import ROOT
from . import validate as v
from .errors import ClaimgridError

COMMANDS = ("run", "list", "reclassify", "gateway", "venvs")
_csv = v.names  # comma-separated names: none empty, none repeated


def build_parser() -> argparse.ArgumentParser:
    p = v.OneLineParser(
        prog="grid.py",
        description="Run agent frameworks on the same tasks under every condition and check "
                    "their claims against what the harness observed. With no command: run the "
                    "full default matrix offline.")
    sub = p.add_subparsers(dest="command")

    def data_opts(sp):
        sp.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks", help="folder of task folders")
        sp.add_argument("--conditions-dir", type=Path, default=ROOT / "conditions", help="folder with content/ and swap/")
        sp.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml", help="framework entries (venvs.toml)")

    run = sub.add_parser("run", help="run a grid (the default command)")
    data_opts(run)
    run.add_argument("--frameworks", type=_csv, help="comma-separated framework names (default: all in venvs.toml)")
    run.add_argument("--tasks", type=_csv, help="comma-separated task ids (default: all)")
    run.add_argument("--content", type=_csv, help="content conditions (default: all four)")
    run.add_argument("--swap", type=_csv, help="swap conditions (default: all four)")
    run.add_argument("--models", "--model", dest="models", type=_csv,
                     help="reference model names or LiteLLM model strings (default: the five reference models)")
    # Grid-defining flags default to None so that --resume can tell "given" from "default";
    # claimgrid.grid fills in the defaults (claimgrid.validate.DEFAULT_*).
    run.add_argument("--substitute", type=v.text,
                     help="the model that serves after the assigned one becomes unavailable (default: reader)")
    run.add_argument("--repeats", type=v.whole(1, v.MAX_REPEATS), default=None,
                     help=f"runs per cell, 1 to {v.MAX_REPEATS} (default: 1); the grid is at most {v.MAX_GRID:,} runs")
    run.add_argument("--jobs", type=v.whole(1, v.MAX_JOBS), default=None,
                     help=f"parallel runs, 1 to {v.MAX_JOBS} (default: number of CPUs)")
    run.add_argument("--timeout", type=v.seconds(v.MAX_TIMEOUT_S), default=None,
                     help=f"seconds per run before its process group is killed, more than 0 and at most "
                          f"{v.MAX_TIMEOUT_S:g} (default: {v.DEFAULT_TIMEOUT_S:g})")
    run.add_argument("--out", type=Path, default=None,
                     help="new ledger folder to write, in a writable place (default: ledger/<grid id>)")
    run.add_argument("--isolation", choices=("warm", "fresh"), default=None,
                     help="warm (default): fork each run from a parent that has imported the framework; "
                          "fresh: a new interpreter per run")
    run.add_argument("--resume", type=Path, default=None, metavar="DIR", help="finish an interrupted grid in DIR")
    run.add_argument("--max-model-calls", type=v.whole(1, v.MAX_MODEL_CALLS), default=None,
                     help=f"per-run model call budget enforced by the gateway, 1 to {v.MAX_MODEL_CALLS} "
                          f"(default: {v.DEFAULT_MAX_MODEL_CALLS})")
    run.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")

    ls = sub.add_parser("list", help="list tasks, conditions, frameworks and models")
    data_opts(ls)

    rc = sub.add_parser("reclassify", help="re-derive every classification from stored evidence and rewrite the ledger")
    rc.add_argument("dir", type=Path)
    rc.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks")

    gw = sub.add_parser("gateway", help="start the harness model gateway alone and print its URL")
    gw.add_argument("rest", nargs=argparse.REMAINDER)

    ve = sub.add_parser("venvs", help="create or update the per-framework virtualenvs")
    ve.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml")
    ve.add_argument("--frameworks", type=_csv)
    return p


def cmd_list(args) -> int:
    from .conditions import load_content_conditions, load_swap_conditions
    from .reference_truth import BEHAVIOUR, DEFAULT_MODELS
    from .tasks import load_tasks

    v.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    # One name column for every section, as wide as the longest name (ids have no length limit).
    width = max([16, *map(len, [*tasks, *content, *swap, *BEHAVIOUR])])
    roles = max([9, *(len(t.role) for t in tasks.values())])
    print(f"tasks ({len(tasks)}):")
    for t in tasks.values():
        print(f"  {t.id:<{width}} {t.role:<{roles}} {t.spec.title}")
    print(f"content conditions ({len(content)}):")
    for c in content.values():
        print(f"  {c.name:<{width}} {c.description}")
    print(f"swap conditions ({len(swap)}):")
    for s in swap.values():
        print(f"  {s.name:<{width}} {s.description}")
    try:
        from .venvs import load_venvs
        fws = load_venvs(args.venvs)
        print(f"frameworks ({len(fws)}):")
        for name in fws:
            print(f"  {name}")
    except ImportError:
        print("frameworks: (venvs module not available)")
    print(f"reference models ({len(BEHAVIOUR)}; default grid: {', '.join(DEFAULT_MODELS)}):")
    for name, text in BEHAVIOUR.items():
        print(f"  {name:<{width}} {text}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["run", *argv]
    args = build_parser().parse_args(argv)
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
        return code
    except BrokenPipeError:
        # The reader went away (`grid.py list | head`): stop quietly, like any Unix filter.
        # stdout is pointed at /dev/null so that the interpreter's final flush cannot complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a filter whose reader left
    except ClaimgridError as exc:
        print(f"grid.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.cli_status
    except KeyboardInterrupt:
        print("grid.py: interrupted", file=sys.stderr)
        return 130


def _dispatch(args) -> int:
    """Run the parsed command; user errors are raised as ClaimgridError (main prints them)."""
    if args.command == "list":
        return cmd_list(args)
    if args.command == "run":
        from .grid import cmd_run
        return cmd_run(args)
    if args.command == "reclassify":
        from .grid import cmd_reclassify
        return cmd_reclassify(args)
    if args.command == "gateway":
        from .gateway import serve_cli
        return serve_cli(args.rest) or 0
    if args.command == "venvs":
        from .venvs import ensure_venvs, load_venvs
        from .tasks import select
        v.check_data_flags(args)
        entries = load_venvs(args.venvs)
        if args.frameworks:
            entries = dict(zip(args.frameworks, select(entries, args.frameworks, "framework")))
        ensure_venvs(entries)
        return 0
    return 0
