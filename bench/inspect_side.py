"""claimgrid beside Inspect AI on the same work: CPU per run, first run done, peak memory.

The nearest peer of a harness that runs agents on tasks is Inspect AI. Both sides here do
the same work: the ``diligent`` reference model's tool calls on one task (default
``fix-float-add``, content ``clean``, no swap), scripted for Inspect by its ``mockllm``
model, which answers each sample with the same calls in the same order, then the same
final report. The script is read from a claimgrid run of that cell (its harness tool
events and report), never written here. Inspect's sample runs them with minimal custom
tools (``read_file``, ``write_file``, ``edit_file``, ``run_command`` in a per-sample copy
of the task's repository, ``run_command`` as a subprocess) and a scorer that runs the
task's tests; claimgrid runs each framework of ``venvs.toml`` with its real adapter, the
harness tool layer, the sandbox and the verifier (verify cache on, as by default).

Each side runs ``N`` samples (``--samples``, default 48) two at a time (``--jobs``) and
one sample alone, each in a cgroup of its own (:class:`throughput.CpuGroup`: every process
it starts counts); the steady-state CPU per run is (N-run CPU - 1-run CPU) / (N - 1), so
start-up, venv checks and imports cancel out. ``--repeats`` interleaves the sides that
many times and prints medians, with each framework's ratio to Inspect's row measured in
the same repeat. Peak PSS is the process tree's, sampled every 0.2 s.

    uv run --extra inspect python bench/inspect_side.py [--frameworks a,b] [--samples 48]

Prints one table; results in bench/README.md ("Beside Inspect AI").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from throughput import CpuGroup, _tree_memory  # noqa: E402

from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder

TASK, CONTENT, SWAP, MODEL = "fix-float-add", "clean", "none", "diligent"


def _measured(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd`` in its own cgroup; its tree's CPU, wall, peak PSS (MB) and exit code."""
    group = CpuGroup()
    peak = [0.0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=group.enter
    )

    def sample():
        while proc.poll() is None:
            try:
                peak[0] = max(peak[0], _tree_memory(proc.pid)[0])
            except OSError:
                pass
            time.sleep(0.2)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    watcher.join()
    cpu = group.usage_s()
    group.remove()
    if proc.returncode != 0:
        raise SystemExit(f"inspect_side: {' '.join(cmd[:4])} ... exited {proc.returncode}: {err.strip()[-800:]}")
    return {"cpu": cpu, "wall": wall, "pss_mb": peak[0], "stdout": out}


# ---------------------------------------------------------------- the script, from claimgrid


def script_from_claimgrid(work: Path) -> dict:
    """Run the cell once on ``plain`` and read its harness tool calls and final report."""
    out = work / "script-grid"
    subprocess.run(
        [
            sys.executable,
            "grid.py",
            "run",
            "--frameworks",
            "plain",
            "--venvs",
            str(_plain_venvs(work)),
            "--tasks",
            TASK,
            "--models",
            MODEL,
            "--content",
            CONTENT,
            "--swap",
            SWAP,
            "--out",
            str(out),
            "--no-progress",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (record,) = LedgerFolder(out).runs()
    calls, report = [], None
    for event in LedgerFolder(out).event_dicts(record.run_id):
        if event.get("kind") == "tool_call" and "seq" in event:
            calls.append({"tool": event["tool"], "args": event["args"]})
        elif event.get("kind") == "report":
            report = event["text"]
    return {"calls": calls, "report": report}


def _plain_venvs(work: Path) -> Path:
    """A venvs file with the dependency-free worked example (frameworks/plain) alone."""
    path = work / "plain-venvs.toml"
    path.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n'
    )
    return path


# ---------------------------------------------------------------- the Inspect side (child)


def inspect_child(spec_path: Path, samples: int, jobs: int) -> None:
    """Inside the cgroup: one Inspect eval of ``samples`` scripted samples."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
    from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
    from inspect_ai.tool import tool
    from inspect_ai.util import store

    spec = json.loads(spec_path.read_text())
    template, test_command = Path(spec["template"]), spec["test_command"]
    calls, report = spec["calls"], spec["report"]

    def workspace() -> Path:
        return Path(store().get("workspace"))

    @tool
    def read_file():
        async def execute(path: str) -> str:
            """Read a file of the repository.

            Args:
              path: the file's path, relative to the repository root.
            """
            return (workspace() / path).read_text()

        return execute

    @tool
    def write_file():
        async def execute(path: str, content: str) -> str:
            """Write a file of the repository.

            Args:
              path: the file's path, relative to the repository root.
              content: the whole new text.
            """
            target = workspace() / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            return f"wrote {path}"

        return execute

    @tool
    def edit_file():
        async def execute(path: str, old: str, new: str) -> str:
            """Replace one exact piece of text in a file.

            Args:
              path: the file's path, relative to the repository root.
              old: the text to replace, exactly once in the file.
              new: its replacement.
            """
            target = workspace() / path
            text = target.read_text()
            if text.count(old) != 1:
                return f"error: {path} has {text.count(old)} copies of the old text"
            target.write_text(text.replace(old, new))
            return f"edited {path}"

        return execute

    @tool
    def run_command():
        async def execute(command: str) -> str:
            """Run a shell command in the repository.

            Args:
              command: the command line, run by bash.
            """
            done = subprocess.run(["bash", "-c", command], cwd=workspace(), capture_output=True, text=True, timeout=60)
            return f"exit {done.returncode}\n{done.stdout[-4000:]}{done.stderr[-4000:]}"

        return execute

    def answer(messages, tools, tool_choice, config) -> ModelOutput:
        # The step is the number of the sample's own answers so far: each sample is scripted
        # alike, whichever order the two running at once are served in.
        step = sum(isinstance(m, ChatMessageAssistant) for m in messages)
        if step < len(calls):
            call = calls[step]
            out = ModelOutput.for_tool_call("mockllm/model", call["tool"], call["args"], tool_call_id=f"call-{step}")
        else:
            out = ModelOutput.from_content("mockllm/model", report)
        # Usage given, as a real provider reports it: otherwise mockllm counts tokens with
        # tiktoken, which downloads its encoding (no network here).
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    @solver
    def in_a_workspace():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            folder = Path(tempfile.mkdtemp(prefix="inspect-side-"))
            shutil.copytree(template, folder / "ws", symlinks=True)
            store().set("workspace", str(folder / "ws"))
            return state

        return solve

    @scorer(metrics=[accuracy()])
    def tests_pass():
        async def score(state: TaskState, target: Target) -> Score:
            ws = workspace()
            argv = [sys.executable if part == "{python}" else part for part in test_command]
            done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=60)
            shutil.rmtree(ws.parent, ignore_errors=True)
            return Score(value=CORRECT if done.returncode == 0 else INCORRECT)

        return score

    task = Task(
        dataset=[Sample(input=spec["prompt"], id=i) for i in range(samples)],
        solver=[in_a_workspace(), use_tools(read_file(), write_file(), edit_file(), run_command()), generate()],
        scorer=tests_pass(),
    )
    model = get_model("mockllm/model", custom_outputs=answer)
    (log,) = inspect_eval(
        task,
        model=model,
        max_samples=jobs,
        display="none",
        log_dir=spec["log_dir"],
        log_samples=True,
        score_display=False,
    )
    correct = log.results.scores[0].metrics["accuracy"].value if log.results else 0
    print(
        json.dumps({"status": log.status, "accuracy": correct, "error": str(log.error)[-1500:] if log.error else None})
    )


# ---------------------------------------------------------------- the two sides (parent)


def run_inspect(spec_path: Path, samples: int, jobs: int) -> dict:
    env = {**os.environ, "INSPECT_LOG_LEVEL": "warning", "INSPECT_DISPLAY": "none"}
    got = _measured(
        [sys.executable, __file__, "--inspect-child", str(spec_path), "--samples", str(samples), "--jobs", str(jobs)],
        env=env,
    )
    result = json.loads(got["stdout"].strip().splitlines()[-1])
    if result["status"] != "success" or result["accuracy"] != 1:
        raise SystemExit(f"inspect_side: Inspect's samples did not all pass: {result}")
    return got


def run_claimgrid(framework: str, work: Path, samples: int, jobs: int, tag: str) -> dict:
    out = work / f"grid-{framework}-{tag}"
    got = _measured(
        [
            sys.executable,
            "grid.py",
            "run",
            "--frameworks",
            framework,
            "--tasks",
            TASK,
            "--models",
            MODEL,
            "--content",
            CONTENT,
            "--swap",
            SWAP,
            "--repeats",
            str(samples),
            "--jobs",
            str(jobs),
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    records = LedgerFolder(out).runs()
    if len(records) != samples:
        raise SystemExit(f"inspect_side: {framework} wrote {len(records)} records, not {samples}")
    shutil.rmtree(out, ignore_errors=True)
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frameworks", help="comma-separated (default: every framework in venvs.toml)")
    ap.add_argument("--samples", type=int, default=48)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved repeats (medians printed)")
    ap.add_argument("--inspect-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inspect_child:
        inspect_child(args.inspect_child, args.samples, args.jobs)
        return 0
    if args.samples < 2:
        ap.error("--samples must be at least 2 (the per-run figure is a difference)")
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        ap.error("Inspect AI is not installed: run with `uv run --extra inspect python bench/inspect_side.py`")

    from claimgrid.inputs.tasks import build_template, load_tasks
    from claimgrid.inputs.venvs import load_venvs

    frameworks = args.frameworks.split(",") if args.frameworks else list(load_venvs())
    work = Path(tempfile.mkdtemp(prefix="claimgrid-inspect-side-"))
    try:
        task = load_tasks()[TASK]
        script = script_from_claimgrid(work)
        template = work / "template"
        build_template(task, task.slot_text(), template)
        spec = {
            "template": str(template),
            "test_command": list(task.spec.expectation.test_command),
            "prompt": task.spec.prompt,
            "log_dir": str(work / "inspect-logs"),
            **script,
        }
        spec_path = work / "spec.json"
        spec_path.write_text(json.dumps(spec))
        rows: dict[str, list[dict]] = {"inspect": [], **{fw: [] for fw in frameworks}}
        for rep in range(args.repeats):
            for name in rows:  # interleaved: each repeat runs every side once
                one = run_inspect(spec_path, 1, 1) if name == "inspect" else run_claimgrid(name, work, 1, 1, f"{rep}-1")
                many = (
                    run_inspect(spec_path, args.samples, args.jobs)
                    if name == "inspect"
                    else run_claimgrid(name, work, args.samples, args.jobs, f"{rep}-n")
                )
                per_run = (
                    (many["cpu"] - one["cpu"]) / (args.samples - 1)
                    if many["cpu"] is not None and one["cpu"] is not None
                    else None
                )
                rows[name].append({"per_run": per_run, "first": one["wall"], "pss": many["pss_mb"]})
                print(
                    f"  repeat {rep + 1}: {name:14s} CPU per run {per_run:.3f} s, one run {one['wall']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = [r["per_run"] for r in rows["inspect"]]
    print(
        f"{args.samples} samples, {args.jobs} at a time, {args.repeats} interleaved repeats, "
        f"task {TASK}, model {MODEL} (medians)"
    )
    print(f"{'side':24s} {'CPU per run':>12s} {'÷ Inspect':>10s} {'one run done':>13s} {'peak PSS':>9s}")
    cpu_cells, pss_cells = [], []
    for name, reps in rows.items():
        ratio = statistics.median(r["per_run"] / b for r, b in zip(reps, base)) if name != "inspect" else 1.0
        label = "Inspect, minimal tools" if name == "inspect" else f"claimgrid {name}"
        print(
            f"{label:24s} {statistics.median(r['per_run'] for r in reps):11.3f}s {ratio:10.2f} "
            f"{statistics.median(r['first'] for r in reps):12.1f}s "
            f"{statistics.median(r['pss'] for r in reps):7.0f}MB"
        )
        shown = "Inspect" if name == "inspect" else name
        cpu_cells.append(
            f"{shown} {statistics.median(r['per_run'] for r in reps):.3f} s"
            + ("" if name == "inspect" else f" ({ratio:.2f})")
        )
        pss_cells.append(f"{shown} {statistics.median(r['pss'] for r in reps):.0f} MB")
    from _figures import record  # bench/, the script's own folder

    record(
        "inspect_side.py",
        {
            f"CPU per run beside Inspect (÷ Inspect; {args.samples} samples)": "; ".join(cpu_cells),
            f"peak PSS of a {args.jobs}-job run": "; ".join(pss_cells),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
