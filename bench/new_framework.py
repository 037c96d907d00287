#!/usr/bin/env python3
"""A newcomer adding a framework, timed: ``new-framework`` → its venv → its conformance suite.

    uv run bench/new_framework.py [--reference pydantic-ai] [--keep]

In a temporary copy of this checkout (its files as they are, without ``.git``, ``.venv``,
``.venvs`` or ledgers), does what README's "Adding a framework" says, with a reference
adapter standing in for the newcomer's own ``run()``:

1. ``uv run grid.py new-framework <name> --dependency <pin> ...`` with the reference
   framework's own pins (its ``pyproject.toml``): the project, its lock and the skeleton;
2. ``uv run grid.py venvs --frameworks <name>``: its venv (uv's cache as it is on this machine:
   a newcomer's second framework, not a cold cache; bench/fresh_clone.py times a cold one);
3. the reference adapter copied over the skeleton (its ``FRAMEWORK`` renamed, its venvs.toml
   ``env`` table copied into the new entry): the part a newcomer writes, not timed;
4. ``uv run --group dev pytest tests/frameworks/test_conformance.py -k <name>``: the
   conformance suite on the new entry.

Prints each step's wall time and the CPU of its process tree (``RUSAGE_CHILDREN``), the
machine's load average before and after (the cores may be shared), and exits 1 if a step
failed. The copy's own environment is this checkout's (``UV_PROJECT_ENVIRONMENT``: the same
lock), so no driver venv is built.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", ".venvs", "ledger", "__pycache__", ".pytest_cache", ".claimgrid-stamp"}


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _step(label: str, argv: list[str], cwd: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    t0, c0 = time.monotonic(), _cpu()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall, cpu = time.monotonic() - t0, _cpu() - c0
    print(f"{label:<34} {wall:7.1f} s wall {cpu:7.1f} CPU-s  exit {proc.returncode}", flush=True)
    return wall, cpu, proc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--reference", default="pydantic-ai", help="the framework whose adapter stands in (default pydantic-ai)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = ap.parse_args(argv)
    ref = ROOT / "frameworks" / args.reference
    venvs = tomllib.loads((ROOT / "venvs.toml").read_text())["frameworks"]
    if (
        not (ref / "adapter.py").is_file()
        or args.reference not in venvs
        or venvs[args.reference].get("kind", "python") != "python"
    ):
        print(
            f"bench/new_framework.py: --reference {args.reference!r} is no Python framework of venvs.toml",
            file=sys.stderr,
        )
        return 2
    pins = tomllib.loads((ref / "pyproject.toml").read_text())["project"]["dependencies"]
    name = "newcomer-" + args.reference
    tmp = Path(tempfile.mkdtemp(prefix="claimgrid-new-framework-"))
    project = tmp / "project"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(UV_PROJECT_ENVIRONMENT=sys.prefix, UV_PYTHON_DOWNLOADS="never")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; copy in {project}")
    try:
        shutil.copytree(ROOT, project, ignore=lambda d, names: [n for n in names if n in SKIP])
        total_wall = total_cpu = 0.0
        walls: list[float] = []
        deps = [a for pin in pins for a in ("--dependency", pin)]
        steps = [
            ("1. new-framework (project + lock)", ["uv", "run", "--frozen", "grid.py", "new-framework", name, *deps]),
            ("2. venvs --frameworks NAME", ["uv", "run", "--frozen", "grid.py", "venvs", "--frameworks", name]),
        ]
        for label, cmd in steps:
            wall, cpu, proc = _step(label, cmd, project, env)
            total_wall, total_cpu = total_wall + wall, total_cpu + cpu
            walls.append(wall)
            if proc.returncode != 0:
                print((proc.stdout + proc.stderr)[-3000:], file=sys.stderr)
                return 1
        # 3. The reference adapter in place of the skeleton (what the newcomer writes: not timed).
        text = (ref / "adapter.py").read_text()
        (project / "frameworks" / name / "adapter.py").write_text(
            re.sub(r'^FRAMEWORK = ".*"$', f'FRAMEWORK = "{name}"', text, count=1, flags=re.M)
        )
        table = venvs[args.reference].get("env") or {}
        if table:
            entry = "".join(f'{k} = "{v}"\n' for k, v in table.items())
            with open(project / "venvs.toml", "a") as fh:
                fh.write(f"\n[frameworks.{name}.env]\n{entry}")
        wall, cpu, proc = _step(
            "4. conformance suite (-k NAME)",
            [
                "uv",
                "run",
                "--frozen",
                "--group",
                "dev",
                "pytest",
                "tests/frameworks/test_conformance.py",
                "-k",
                name,
                "-q",
                "-p",
                "no:cacheprovider",
            ],
            project,
            env,
        )
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        summary = next((ln for ln in reversed(proc.stdout.splitlines()) if " passed" in ln or " failed" in ln), "")
        print(f"   {summary.strip()}")
        print(f"{'total (steps 1, 2 and 4)':<34} {total_wall:7.1f} s wall {total_cpu:7.1f} CPU-s")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if proc.returncode != 0:
            print(proc.stdout[-3000:], file=sys.stderr)
            return 1
        from _figures import record  # bench/, the script's own folder

        record(
            "new_framework.py",
            {
                f"new-framework, venv, conformance suite (wall; reference {args.reference})": f"{walls[0]:.1f} s, {walls[1]:.1f} s, {wall:.1f} s; total {total_wall:.1f} s ({total_cpu:.1f} CPU-s)",
            },
        )
        return 0
    finally:
        if args.keep:
            print(f"kept: {project}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
