"""Argument parsing and the commands of grid.py. User errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from claimgrid import ROOT
from claimgrid.commands import validate as v
from claimgrid.errors import ClaimgridError

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
    "report",
)
_csv = v.names  # comma-separated names: none empty, none repeated


def build_parser() -> argparse.ArgumentParser:
    p = v.OneLineParser(
        prog="grid.py",
        description="Run agent frameworks on the same tasks under every condition and check "
        "their claims against what the harness observed. With no command: run the "
        "full default matrix offline.",
    )
    sub = p.add_subparsers(dest="command")

    def data_opts(sp):
        sp.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks", help="an existing folder of task folders")
        sp.add_argument(
            "--conditions-dir",
            type=Path,
            default=ROOT / "conditions",
            help="an existing folder with content/ and swap/",
        )
        sp.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml", help="an existing file of framework entries")

    def policies_opt(sp):
        sp.add_argument(
            "--policies",
            type=Path,
            action="append",
            default=[],
            metavar="FILE.py",
            help="an existing Python file registering extra reference models (policy + true behaviour) "
            "with @claimgrid.reference.reference_model; may be repeated",
        )

    def key_opt(sp):
        sp.add_argument(
            "--key",
            type=Path,
            default=None,
            metavar="FILE",
            help="the publisher's ed25519 private key that seals the ledger, made on first use, never inside a "
            "ledger (default: $CLAIMGRID_KEY, else ~/.config/claimgrid/ed25519.pem)",
        )

    run = sub.add_parser("run", help="run a grid (the default command)")
    data_opts(run)
    policies_opt(run)
    key_opt(run)
    run.add_argument("--frameworks", type=_csv, help="comma-separated framework names (default: all in venvs.toml)")
    run.add_argument(
        "--tasks", type=_csv, help="comma-separated task ids, from any suite (default: the --suite's tasks)"
    )
    run.add_argument(
        "--suite", type=v.text, default=None, help="the tasks whose task.toml has this suite (default: 'default')"
    )
    run.add_argument("--content", type=_csv, help="content condition names, from conditions/content/ (default: all)")
    run.add_argument("--swap", type=_csv, help="swap condition names, from conditions/swap/ (default: all)")
    run.add_argument(
        "--models",
        "--model",
        dest="models",
        type=_csv,
        help="reference model names or LiteLLM model strings (default: the registry's default models)",
    )
    # Grid-defining flags default to None so that --resume can tell "given" from "default";
    # claimgrid.commands.flags fills in the defaults (claimgrid.execute.spec.DEFAULT_*).
    run.add_argument(
        "--substitute",
        type=v.text,
        help="one reference model name or LiteLLM model string: the model that serves after the assigned one "
        "becomes unavailable (default: the registry's substitute)",
    )
    run.add_argument(
        "--repeats",
        type=v.whole(1, v.MAX_REPEATS),
        default=None,
        help=f"runs per cell, 1 to {v.MAX_REPEATS} (default: 1); the grid is at most {v.MAX_GRID:,} runs",
    )
    run.add_argument(
        "--jobs",
        type=v.whole(1, v.MAX_JOBS),
        default=None,
        help=f"runs using CPU at once, 1 to {v.MAX_JOBS} (default: number of CPUs); a run "
        "that is waiting (a fault's delay, a back-off, a provider) does not hold a job",
    )
    run.add_argument(
        "--max-inflight",
        type=v.whole(1, v.MAX_INFLIGHT),
        default=None,
        help=f"runs in flight at all, waiting or not, 1 to {v.MAX_INFLIGHT} (default: 4 per job, "
        "and at least the grid's provider connections plus the jobs)",
    )
    run.add_argument(
        "--max-connections",
        type=v.connections,
        action="append",
        default=None,
        metavar="N|PROVIDER=N",
        help="calls in flight to one real provider, N from 1 to 10000 (default 10 each); N for every provider, "
        "PROVIDER=N for one (repeatable); a call over it waits in the gateway (queued_ms in its exchange "
        "event). Reference models have no limit",
    )
    run.add_argument(
        "--local-models",
        type=Path,
        default=None,
        metavar="FILE",
        help="the local models --models local/<name> names (default: models/local.toml; "
        "needs the extra: uv sync --extra local-model)",
    )
    run.add_argument(
        "--timeout",
        type=v.seconds(v.MAX_TIMEOUT_S),
        default=None,
        help=f"seconds per run before its process group is killed, more than 0 and at most "
        f"{v.MAX_TIMEOUT_S:g}, not inf or nan; every model, over models/limits.toml "
        f"(default: {v.DEFAULT_TIMEOUT_S:g} for reference models, {v.REAL_TIMEOUT_S:g} for real ones)",
    )
    run.add_argument(
        "--out",
        type=Path,
        default=None,
        help="new ledger folder to write, in a writable place (default: ledger/<grid id>)",
    )
    run.add_argument(
        "--isolation",
        choices=("warm", "fresh"),
        default=None,
        help="warm: fork each run from a parent that has imported the framework; "
        "fresh: a new interpreter per run (default: warm)",
    )
    run.add_argument(
        "--guard",
        choices=("auto", "on", "off"),
        default="auto",
        help="sandbox the agent's commands with bubblewrap: auto (default) = on where namespaces work, "
        "on = fail where they do not, off = unguarded (recorded in meta.json and every run)",
    )
    run.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="finish an interrupted grid in DIR, a folder written by grid.py run with a readable meta.json",
    )
    run.add_argument(
        "--max-model-calls",
        type=v.whole(1, v.MAX_MODEL_CALLS),
        default=None,
        help=f"per-run model call budget (turn limit) enforced by the gateway, 1 to {v.MAX_MODEL_CALLS}; every "
        f"model, over models/limits.toml (default: {v.DEFAULT_MAX_MODEL_CALLS} for reference models, "
        f"{v.REAL_MAX_MODEL_CALLS} for real ones)",
    )
    run.add_argument(
        "--limits",
        type=Path,
        default=None,
        metavar="FILE",
        help='per-model limits: [models."<glob>"] tables of call_timeout_s, max_output_tokens, max_model_calls, '
        "max_run_tokens, timeout_s (default: models/limits.toml)",
    )
    run.add_argument(
        "--call-timeout",
        type=v.seconds(v.MAX_CALL_TIMEOUT_S),
        default=None,
        metavar="S",
        help="per-call deadline in seconds: the gateway ends a real model's call that has not answered by then "
        "(recorded as a limit hit) and the adapter's client gets it too; every model, over models/limits.toml "
        f"(default: {v.REFERENCE_CALL_TIMEOUT_S:g} for reference models, {v.REAL_CALL_TIMEOUT_S:g} for real ones)",
    )
    run.add_argument(
        "--max-output-tokens",
        type=v.whole(1, v.MAX_OUTPUT_TOKENS),
        default=None,
        metavar="N",
        help="per-call output-token cap the gateway sets on every real model call (max_tokens lowered or set; "
        f"recorded); every model, over models/limits.toml (default: {v.REAL_MAX_OUTPUT_TOKENS} for real models; "
        "reference models are not capped)",
    )
    run.add_argument(
        "--max-run-tokens",
        type=v.whole(1, v.MAX_RUN_TOKENS),
        default=None,
        metavar="N",
        help="per-run prompt+completion token budget (provider usage): the gateway refuses the run's calls past it; "
        f"every model, over models/limits.toml (default: {v.REAL_MAX_RUN_TOKENS:,} for real models, none for reference)",
    )
    run.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: run on this machine (default); ray: one node per Ray node (needs the ray extra)",
    )
    run.add_argument(
        "--address",
        default=None,
        help="with --backend ray: the Ray cluster address (default: a cluster started on this machine with `ray start`)",
    )
    run.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    run.add_argument(
        "--no-verify-cache",
        action="store_true",
        help="re-run every run's tests, even where an identical final workspace was tested already "
        "(recorded in meta.json; default: a run reuses that result and its evidence names the run)",
    )
    # Real models: spend limits and provider retries (claimgrid.gateway.budget / .retry).
    run.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="no new run starts once the grid's model spend reaches USD (LiteLLM prices; "
        "unpriced models count tokens only); runs in flight finish (default: no limit)",
    )
    run.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="no new run starts once the grid's prompt+completion tokens reach N (default: no limit)",
    )
    run.add_argument(
        "--provider-retries",
        type=int,
        default=None,
        metavar="N",
        help="retries of a real provider's transient error (429, 5xx, reset) inside the gateway (default 4)",
    )
    run.add_argument(
        "--provider-backoff",
        type=float,
        default=None,
        metavar="S",
        help="first retry wait in seconds, doubled per retry; a longer Retry-After wins (default 1)",
    )
    run.add_argument(
        "--provider-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds one provider attempt may take before it is abandoned and retried (default 300)",
    )

    ls = sub.add_parser("list", help="list tasks, conditions, frameworks and models")
    data_opts(ls)
    policies_opt(ls)

    ct = sub.add_parser("check-task", help="check tasks' answer keys against their fixtures (exit 2 on a problem)")
    data_opts(ct)
    ct.add_argument("ids", nargs="*", metavar="ID", help="task ids (default: every task in --tasks-dir)")

    rc = sub.add_parser("reclassify", help="re-derive every classification from stored evidence and rewrite the ledger")
    rc.add_argument("dir", type=Path)
    rc.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks")
    rc.add_argument("--conditions-dir", type=Path, default=ROOT / "conditions")
    policies_opt(rc)
    key_opt(rc)

    rp = sub.add_parser(
        "replay",
        help="re-execute every run of a ledger offline, serving its recorded model "
        "responses; report request-hash and classification matches",
    )
    rp.add_argument("dir", type=Path, help="the published ledger folder")
    data_opts(rp)
    policies_opt(rp)
    key_opt(rp)
    rp.add_argument(
        "--out", type=Path, default=None, help="new ledger folder (default: ledger/<grid id>.replay-<time>)"
    )
    rp.add_argument("--jobs", type=int, default=None, help="parallel runs (default: the recorded grid's)")
    rp.add_argument("--no-progress", action="store_true")

    ex = sub.add_parser(
        "export",
        help="write a ledger as files other tools read: Inspect eval logs (inspect view) or OpenTelemetry "
        "GenAI traces (OTLP/JSON)",
    )
    ex.add_argument("dir", type=Path, help="the ledger folder")
    ex.add_argument("--format", required=True, choices=("inspect", "otel"), help="inspect or otel")
    ex.add_argument("--out", type=Path, default=None, help="a new folder for the export (default: DIR.FORMAT)")
    ex.add_argument(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help="with --format otel: also send the spans to this OTLP/HTTP traces URL",
    )

    cp = sub.add_parser(
        "compare",
        help="compare two ledgers cell by cell (seals verified first); exit 0 identical, 1 different, 2 bad input",
    )
    cp.add_argument("a", type=Path, metavar="A", help="a ledger folder (before)")
    cp.add_argument("b", type=Path, metavar="B", help="a ledger folder (after)")
    cp.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for compare.md and compare.json (default: compare-<A>-vs-<B> next to B)",
    )

    gw = sub.add_parser("gateway", help="start the harness model gateway alone and print its URL")
    gw.add_argument("rest", nargs=argparse.REMAINDER)

    ve = sub.add_parser(
        "venvs", help="create or update the per-framework virtualenvs (and the tasks' own environments)"
    )
    ve.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml")
    ve.add_argument("--frameworks", type=_csv)
    ve.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks", help="tasks whose own environments to build too")

    from claimgrid.commands import check, rerender, verify_repo

    verify_repo.add_parser(sub)
    check.add_parser(sub)
    rerender.add_parser(sub)

    nf = sub.add_parser(
        "new-framework", help="scaffold frameworks/NAME on the adapter kit, lock it, add its venvs.toml entry"
    )
    nf.add_argument("name")
    nf.add_argument(
        "--dependency",
        action="append",
        default=[],
        metavar="PKG==VERSION",
        help="an exact pin for the framework's environment (repeatable)",
    )
    nf.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml")
    return p


def cmd_list(args) -> int:
    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import load_tasks
    from claimgrid.reference.registry import default_models, models

    v.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    if getattr(args, "policies", None):
        from claimgrid.reference.registry import load_policies

        for path in args.policies:
            load_policies(path)
    registered = models()
    from claimgrid.commands.check_task import static_problems

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
        problems += static_problems(t)
    print(f"content conditions ({len(content)}):")
    for c in content.values():
        print(f"  {c.name:<{width}} {c.description}")
    print(f"swap conditions ({len(swap)}):")
    for s in swap.values():
        print(f"  {s.name:<{width}} {s.description}")
    try:
        from claimgrid.inputs.venvs import load_venvs

        fws = load_venvs(args.venvs)
        print(f"frameworks ({len(fws)}):")
        for name, entry in fws.items():
            # venvs.toml ``default = false``: checked by the conformance suite, run only when named.
            print(f"  {name}" + ("" if entry.default else f"  (not in the default matrix: --frameworks {name})"))
    except ImportError:
        print("frameworks: (venvs module not available)")
    print(f"reference models ({len(registered)}; default grid: {', '.join(default_models())}):")
    for name, m in registered.items():
        origin = "" if m.origin == "claimgrid" else f"  [{m.origin}]"
        print(f"  {name:<{width}} {m.behaviour}{origin}")
    for line in problems:
        print(f"grid.py: error: {line}", file=sys.stderr)
    return 2 if problems else 0


def cmd_check_task(args) -> int:
    """Check each task's answer key (claimgrid.commands.check_task); one line per problem, exit 2 if any."""
    from concurrent.futures import ThreadPoolExecutor

    from claimgrid.commands.check_task import check_task
    from claimgrid.inputs.conditions import load_content_conditions
    from claimgrid.inputs.tasks import ensure_task_envs, load_tasks, select

    v.check_data_flags(args)
    tasks = load_tasks(args.tasks_dir)
    conditions = load_content_conditions(args.conditions_dir)
    chosen = select(tasks, args.ids, "task") if args.ids else list(tasks.values())
    ensure_task_envs(chosen)  # built one at a time, with a line each, before the parallel checks
    bad = 0
    # Tasks are independent (own temporary workspaces); results are printed in task order.
    with ThreadPoolExecutor(max_workers=max(1, min(len(chosen), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda t: check_task(t, conditions), chosen))
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
        from claimgrid.commands.run import cmd_run

        return cmd_run(args)
    if args.command == "reclassify":
        from claimgrid.commands.reclassify import cmd_reclassify

        return cmd_reclassify(args)
    if args.command == "replay":
        from claimgrid.commands.replay import cmd_replay

        return cmd_replay(args)
    if args.command == "export":
        from claimgrid.commands.export import cmd_export

        return cmd_export(args)
    if args.command == "compare":
        from claimgrid.commands.compare import cmd_compare

        return cmd_compare(args)
    if args.command == "verify":
        from claimgrid.commands.verify_repo import cmd_verify

        return cmd_verify(args)
    if args.command == "check":
        from claimgrid.commands.check import cmd_check

        return cmd_check(args)
    if args.command == "report":
        from claimgrid.commands.rerender import cmd_report

        return cmd_report(args)
    if args.command == "gateway":
        from claimgrid.commands.serve_gateway import serve_cli

        return serve_cli(args.rest) or 0
    if args.command == "new-framework":
        from claimgrid.commands.new_framework import new_framework

        folder = new_framework(args.name, args.venvs, args.dependency)
        print(f"wrote {folder} (pyproject.toml, uv.lock, adapter.py, README.md) and its entry in {args.venvs}")
        print(f"next: fill in run() in {folder / 'adapter.py'}, then: uv run --group dev pytest -k {args.name}")
        return 0
    if args.command == "venvs":
        from claimgrid.inputs.tasks import select
        from claimgrid.inputs.venvs import build_all, load_venvs

        v.check_data_flags(args)
        entries = load_venvs(args.venvs)
        if args.frameworks:
            entries = dict(zip(args.frameworks, select(entries, args.frameworks, "framework")))
        build_all(entries)  # a bounded pool at a time; the first failure is the one-line error
        if not args.frameworks:
            from claimgrid.inputs.tasks import ensure_task_envs, load_tasks

            ensure_task_envs(load_tasks(args.tasks_dir).values())
        return 0
    return 0
