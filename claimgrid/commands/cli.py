"""Argument parsing and the commands of grid.py. User errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from claimgrid import ROOT
from claimgrid.commands import (
    audit,
    check,
    check_ledger,
    check_task,
    compare,
    export,
    new_framework,
    options,
    reclassify,
    replay,
    rerender,
    run,
    serve_gateway,
    stop_hook,
    verify_repo,
)
from claimgrid.commands import validate as v
from claimgrid.errors import ClaimgridError
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import ensure_task_envs, load_tasks, select
from claimgrid.inputs.venvs import build_all, load_venvs
from claimgrid.reference.registry import default_models, load_policies, models

INTERRUPTED = 130  # exit code after Ctrl-C (128 + SIGINT)
COMMANDS = (
    "run",
    "list",
    "check-task",
    "reclassify",
    "replay",
    "compare",
    "export",
    "gateway",
    "venvs",
    "new-framework",
    "verify",
    "check",
    "audit",
    "report",
    "check-ledger",
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command, each added by its own module, in the order ``--help`` lists them."""
    p = v.OneLineParser(
        prog="grid.py",
        description="Run agent frameworks on the same tasks under every condition and check "
        "their claims against what the harness observed. With no command: run the "
        "full default matrix offline.",
    )
    sub = p.add_subparsers(dest="command")
    run.add_parser(sub)
    _add_list(sub)
    check_task.add_parser(sub)
    reclassify.add_parser(sub)
    replay.add_parser(sub)
    export.add_parser(sub)
    compare.add_parser(sub)
    serve_gateway.add_parser(sub)
    _add_venvs(sub)
    verify_repo.add_parser(sub)
    check.add_parser(sub)
    audit.add_parser(sub)
    rerender.add_parser(sub)
    check_ledger.add_parser(sub)
    new_framework.add_parser(sub)
    return p


def _add_list(sub) -> None:
    """``grid.py list``."""
    ls = sub.add_parser("list", help="list tasks, conditions, frameworks and models")
    options.data_opts(ls)
    options.policies_opt(ls)


def _add_venvs(sub) -> None:
    """``grid.py venvs``."""
    ve = sub.add_parser(
        "venvs", help="create or update the per-framework virtualenvs (and the tasks' own environments)"
    )
    ve.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml")
    ve.add_argument("--frameworks", type=v.names)
    ve.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks", help="tasks whose own environments to build too")


def cmd_list(args) -> int:
    v.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    if getattr(args, "policies", None):
        for path in args.policies:
            load_policies(path)
    registered = models()

    # Every column as wide as its longest value (ids have no length limit).
    width = max([16, *map(len, [*tasks, *content, *swap, *registered])])
    roles = max([9, *(len(t.role) for t in tasks.values())])
    suites = max([8, *(len(t.suite) for t in tasks.values())])
    print(f"tasks ({len(tasks)}):")
    problems = []
    for t in tasks.values():
        origin = t.spec.provenance.repository if t.spec.provenance else "written for claimgrid"
        env = "own env" if t.env else "stdlib"
        print(f"  {t.id:<{width}} {t.role:<{roles}} {t.suite:<{suites}} {env:<7} {t.spec.title}  [{origin}]")
        problems += check_task.static_problems(t)
    print(f"content conditions ({len(content)}):")
    for c in content.values():
        print(f"  {c.name:<{width}} {c.description}")
    print(f"swap conditions ({len(swap)}):")
    for s in swap.values():
        print(f"  {s.name:<{width}} {s.description}")
    fws = load_venvs(args.venvs)
    print(f"frameworks ({len(fws)}):")
    for name, entry in fws.items():
        # venvs.toml ``default = false``: checked by the conformance suite, run only when named.
        print(f"  {name}" + ("" if entry.default else f"  (not in the default matrix: --frameworks {name})"))
    print(f"reference models ({len(registered)}; default grid: {', '.join(default_models())}):")
    for name, m in registered.items():
        origin = "" if m.origin == "claimgrid" else f"  [{m.origin}]"
        print(f"  {name:<{width}} {m.behaviour}{origin}")
    for line in problems:
        print(f"grid.py: error: {line}", file=sys.stderr)
    return 2 if problems else 0


def cmd_check_task(args) -> int:
    """Check each task's answer key (claimgrid.commands.check_task); one line per problem, exit 2 if any."""
    v.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    conditions = load_content_conditions(args.conditions_dir)
    chosen = select(tasks, args.ids, "task") if args.ids else list(tasks.values())
    ensure_task_envs(chosen)  # built one at a time, with a line each, before the parallel checks
    bad = 0
    # Tasks are independent (own temporary workspaces); results are printed in task order.
    with ThreadPoolExecutor(max_workers=max(1, min(len(chosen), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda t: check_task.check_task(t, conditions), chosen))
    for task, problems in zip(chosen, results):
        for line in problems:
            print(f"grid.py: error: {line}", file=sys.stderr)
        bad += bool(problems)
        print(f"{task.id}: {'ok' if not problems else f'{len(problems)} problem(s)'}", flush=True)
    return 2 if bad else 0


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
        return INTERRUPTED


def _dispatch(args) -> int:
    """Run the parsed command; user errors are raised as ClaimgridError (main prints them)."""
    if args.command == "list":
        return cmd_list(args)
    if args.command == "check-task":
        return cmd_check_task(args)
    if args.command == "run":
        return run.cmd_run(args)
    if args.command == "reclassify":
        return reclassify.cmd_reclassify(args)
    if args.command == "replay":
        return replay.cmd_replay(args)
    if args.command == "export":
        return export.cmd_export(args)
    if args.command == "compare":
        return compare.cmd_compare(args)
    if args.command == "verify":
        return verify_repo.cmd_verify(args)
    if args.command == "check":
        # --hook: the same check in the agent's own stop-hook protocol (claimgrid.commands.stop_hook)
        return stop_hook.cmd_hook(args) if args.hook else check.cmd_check(args)
    if args.command == "audit":
        return audit.cmd_audit(args)
    if args.command == "report":
        return rerender.cmd_report(args)
    if args.command == "check-ledger":
        return check_ledger.cmd_check_ledger(args)
    if args.command == "gateway":
        return serve_gateway.serve_cli(args.rest) or 0
    if args.command == "new-framework":
        folder = new_framework.new_framework(args.name, args.venvs, args.dependency)
        print(f"wrote {folder} (pyproject.toml, uv.lock, adapter.py, README.md) and its entry in {args.venvs}")
        print(f"next: fill in run() in {folder / 'adapter.py'}, then: uv run --group dev pytest -k {args.name}")
        return 0
    if args.command == "venvs":
        v.check_data_flags(args)
        entries = load_venvs(args.venvs)
        if args.frameworks:
            entries = dict(zip(args.frameworks, select(entries, args.frameworks, "framework")))
        build_all(entries)  # a bounded pool at a time; the first failure is the one-line error
        if not args.frameworks:
            ensure_task_envs(load_tasks(args.tasks_dir).values())
        return 0
    return 0
