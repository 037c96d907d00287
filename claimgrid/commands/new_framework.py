"""``grid.py new-framework NAME``: a new framework folder on the adapter kit, locked.

Writes ``frameworks/NAME/`` (``pyproject.toml`` with exact pins and the project's
``exclude-newer`` window, an ``adapter.py`` skeleton on ``frameworks/_harness/kit.py``'s API
(tests/frameworks/test_framework_new.py checks that every ``kit.`` name it uses exists), a README
template), runs ``uv lock`` for it, and only then appends the ``venvs.toml``
entry. Anything that fails (bad name, a pin that is not exact, LiteLLM at another
version than the project's, the lock) is one line and leaves nothing written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.inputs.venvs import TRAFFIC_PACKAGES

NAME_RE = r"[a-z0-9][a-z0-9_-]*"
PIN_RE = r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9_,.-]+\])?==([A-Za-z0-9.+!-]+)"


class ScaffoldError(ClaimgridError):
    """One line: what is wrong with the request; nothing was written."""


def _root_settings(root: Path) -> tuple[str, list[str], str | None]:
    """(exclude-newer, constraint-dependencies, litellm pin) from the project's pyproject."""
    path = root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScaffoldError(f"{path}: cannot read the project's pyproject: {exc}") from None
    uv = data.get("tool", {}).get("uv", {})
    window = uv.get("exclude-newer")
    if not window:
        raise ScaffoldError(
            f"{path}: field 'tool.uv.exclude-newer' is missing (the lock window every framework shares)"
        )
    litellm = next(
        (
            d.split("==", 1)[1].split(";")[0].strip()
            for d in data.get("project", {}).get("dependencies", [])
            if re.match(r"litellm\s*==", d)
        ),
        None,
    )
    return window, list(uv.get("constraint-dependencies", [])), litellm


def _check_pins(pins: list[str], litellm: str | None) -> list[str]:
    out = []
    for pin in pins:
        m = re.fullmatch(PIN_RE, pin.strip())
        if not m:
            raise ScaffoldError(f"--dependency '{pin}': must be an exact pin like 'package==1.2.3'")
        if m.group(1).lower() == "litellm" and litellm and m.group(3) != litellm:
            raise ScaffoldError(f"--dependency '{pin}': LiteLLM is pinned at {litellm} for the whole project")
        out.append(pin.strip())
    return out


def pyproject_text(name: str, pins: list[str], window: str, constraints: list[str]) -> str:
    deps = "".join(f'    "{p}",\n' for p in pins)
    cons = "".join(f'    "{c}",\n' for c in constraints)
    return (
        f'[project]\nname = "claimgrid-framework-{name}"\nversion = "0.1.0"\n'
        f'description = "claimgrid\'s {name} adapter environment (run in its own venv, never imported by the driver)."\n'
        f'requires-python = ">=3.11,<3.12"\ndependencies = [\n{deps}]\n\n[tool.uv]\npackage = false\n'
        f'# The same quarantine window as the driver\'s pyproject.\nexclude-newer = "{window}"\n'
        + (f"constraint-dependencies = [\n{cons}]\n" if cons else "")
    )


ADAPTER = '''"""claimgrid adapter for {name} (runs inside ``.venvs/{name}``, never imported by the driver).

Contract: docs/adapter-authors.md ("Adapter contract", "Adapter correctness rules"). The kit
(frameworks/_harness/kit.py) owns what every adapter shares: the per-run scaffolding
(``kit.start_run``: LiteLLM settings and the served-model probe where ``preload()`` did not
set them, the turn-limit event; ``kit.recording_errors``; ``kit.final_message``), the
preload list and control (``kit.preload``, ``kit.preload_ctl``), the system prompt, and the
runtime-event helpers (``kit.content_text``, ``kit.usage``, ``kit.tool_args``,
``kit.record_error``). Variables only {name} reads (its telemetry or tracing switches) go
in its ``env`` table in venvs.toml, never into os.environ here.
"""

from __future__ import annotations

import kit

FRAMEWORK = "{name}"


def preload() -> None:
    """Import every module a run loads; starts no thread. The names are guessed from the
    distributions' names (check them: an import name may differ); building a throwaway
    agent from ``kit.preload_ctl()`` here (no model call) imports what the first
    construction loads."""
    kit.preload({modules})


def versions() -> dict:
    """Parity facts: the framework's distributions and its own retry settings (``retries``)."""
    return kit.versions(FRAMEWORK, {dists}retries={{}})


def run(ctl: dict, tools: list, rec) -> str | None:
    """Build the framework's agent with ``tools`` (expose each natively: .name, .description,
    .parameters JSON schema, call with keyword arguments), model ``kit.gateway_model(ctl)``
    at ``ctl["gateway_url"]`` with ``api_key=ctl["token"]``, zero client retries
    (``kit.LITELLM_NUM_RETRIES``, ``kit.HTTP_CLIENT_MAX_RETRIES``), per-call timeout
    ``kit.call_timeout(ctl)``, system prompt ``kit.system_prompt(ctl)``, turn limit
    ``limit``; record runtime events on ``rec`` from the framework's own hooks (tool calls
    and model calls attributed to the framework's agent name, the model name from the
    response: ``kit.probe.served()``, usage via ``kit.usage``, arguments via
    ``kit.tool_args``); return the agent's final text. Never catch an exception to turn
    it into a result. A framework that builds a tool's schema from a function's signature:
    ``kit.tool_function(tool, before)``.
    """
    limit = kit.turn_limit(ctl)  # pass it to the framework's own turn limit, named here:
    kit.start_run(rec, ctl, limit, "model calls (max_turns)", "framework")
    agent = ctl["agent_name"]  # or the name the framework attributes the final answer to
    # A failure the framework also reports (an event, a callback): `... as errors:` and
    # errors.report(error, kind); the same failure raised out of the block is then not
    # recorded again (each failure once).
    with kit.recording_errors(rec, agent):
        text: str | None = None
        raise NotImplementedError("fill in run() in frameworks/{name}/adapter.py: build and run the agent")
    return kit.final_message(rec, agent, text)
'''


def framework_distributions(pins: list[str]) -> list[str]:
    """The distributions of ``pins`` the adapter states as parity facts: every pinned one but
    the packages every adapter's parity facts hold already (``TRAFFIC_PACKAGES``: LiteLLM, the
    OpenAI client, httpx)."""
    out = []
    for pin in pins:
        m = re.fullmatch(PIN_RE, pin.strip())
        if m and m.group(1).lower() not in TRAFFIC_PACKAGES and m.group(1) not in out:
            out.append(m.group(1))
    return out


def adapter_text(name: str, pins: list[str]) -> str:
    """The ``adapter.py`` skeleton for ``name`` pinned at ``pins``: ``preload()`` imports the
    framework's modules (import names guessed from the distribution names, ``-`` as ``_``)
    and ``versions()`` states its distributions; the kit calls are the ones README.md's
    "Adding a framework" shows (tests/integration/commands/test_new_framework.py)."""
    dists = framework_distributions(pins)
    modules = ", ".join('"' + d.lower().replace("-", "_").replace(".", "_") + '"' for d in dists)
    return ADAPTER.format(name=name, modules=modules, dists="".join(f'"{d}", ' for d in dists))


README = """# {name} adapter

`adapter.py` runs one claimgrid cell with {name}, inside `.venvs/{name}` (built from this
folder's `pyproject.toml` + `uv.lock`). The driver never imports it.

- Model: (which class, pointed at the gateway; retries)
- Tools: (how the harness tools are exposed)
- Turn limit: (the framework's setting, = the run's model-call budget)
- Runtime events: (where tool calls, model calls and the agent name come from)

What {name} does with each fault (measured with `uv run grid.py run --frameworks {name}
--models <fault models> --content clean --swap none`):

| fault | {name}'s behaviour |
| --- | --- |

Where {name} hands a raw case to the adapter (e.g. unparseable tool arguments), say here
how the adapter passes it on in {name}'s documented way.

Run its conformance tests: `uv run --group dev pytest -k {name}`.
"""


def new_framework(name: str, venvs_path: Path, pins: list[str] | None = None, lock: bool = True) -> Path:
    """Create ``frameworks/NAME`` beside ``venvs_path`` and its entry; returns the folder."""
    root = venvs_path.resolve().parent
    if not re.fullmatch(NAME_RE, name):
        raise ScaffoldError(f"new-framework: '{name}' is not a framework name (lowercase letters, digits, '-', '_')")
    try:
        venvs = tomllib.loads(venvs_path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScaffoldError(f"{venvs_path}: cannot read: {exc}") from None
    if name in venvs.get("frameworks", {}):
        raise ScaffoldError(f"{venvs_path}: field 'frameworks.{name}': already exists")
    folder = root / "frameworks" / name
    if folder.exists():
        raise ScaffoldError(f"new-framework: {folder} already exists")
    window, constraints, litellm = _root_settings(root)
    pins = _check_pins(list(pins or []), litellm)
    folder.mkdir(parents=True)
    try:
        (folder / "pyproject.toml").write_text(pyproject_text(name, pins, window, constraints))
        (folder / "adapter.py").write_text(adapter_text(name, pins))
        (folder / "README.md").write_text(README.format(name=name))
        if lock:
            uv = shutil.which("uv")
            if uv is None:
                raise ScaffoldError("new-framework: 'uv' was not found on PATH; it is needed to lock the environment")
            proc = subprocess.run(
                [uv, "lock", "--project", str(folder), "--python", "3.11"],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
            )
            if proc.returncode != 0:
                lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
                raise ScaffoldError(f"new-framework: uv lock failed: {(lines or ['no output'])[-1].strip()}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    text = venvs_path.read_text()
    entry = (
        f'\n[frameworks.{name}]\npython = "3.11"\nproject = "frameworks/{name}"\n'
        f'adapter = "frameworks/{name}/adapter.py"\n'
        f'# env = {{ NAME = "value" }}  # variables only {name} reads (see the header)\n'
    )
    venvs_path.write_text(text.rstrip("\n") + "\n" + entry)
    return folder


def add_parser(sub) -> None:
    """``grid.py new-framework NAME``."""
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
