"""Shared fixtures: tasks are loaded from the repo; workspaces live under tmp_path.

The tests are in four lanes, one folder each, each laid out like the code it tests
(``tests/<lane>/<stage>/`` for ``claimgrid/<stage>/``; ``tests/frameworks/<name>/`` for
``frameworks/<name>/``). A test's folder is its lane: the lane's marker and, outside
``unit``, a per-test timeout are applied here, so ``-m`` selects a lane as well as a path.

* ``unit``: pure code in this process: no subprocess, no grid, no gateway server
  (``uv run --group dev pytest tests/unit`` takes well under a minute). Starting a process from a
  unit test fails it.
* ``integration``: one real piece at a time: the real gateway, verifier, sandbox,
  launcher, a single run or one ``grid.py`` command that runs no grid.
* ``grid``: real grids through ``grid.py`` (or its ``main``) on the dependency-free
  frameworks (``plain`` and the fixtures under tests/fixtures/frameworks).
* ``frameworks``: needs the framework venvs of ``venvs.toml``; the session builds the
  ones the selected tests use before the first test runs.

Grids that several modules read are run once per session here (``default_grid``,
``ledger_grid``); they are read-only to every test (copy one before changing it).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

# Importing LiteLLM must never reach for the network in tests.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Python images often set PYTHONDONTWRITEBYTECODE=1 (the machine this suite was tuned on does). The
# driver's venv is not compiled at install (pyproject: uv would re-compile it on every `uv run`),
# so under that variable no process caches its bytecode: every xdist worker and every
# `grid.py` the suite starts compiled claimgrid and its dependencies from source again (an
# import of the run path took ~4.5 CPU-s instead of ~1.8 s; collection 60 s instead of 22 s
# on a loaded two-core machine). The suite's processes cache it as Python does by default;
# framework venvs are compiled when built, and the verifier's test runs and the sandbox set
# their own environments, so no workspace or run folder gains a __pycache__.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# Property-based tests (Hypothesis): a bounded number of examples by default, so CI time is
# known; CLAIMGRID_HYPOTHESIS=deep (or pytest --hypothesis-profile=deep) runs many more.
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from claimgrid.inputs.tasks import build_template, load_tasks, materialise  # noqa: E402

# CI does not shrink a failure (its examples start processes: shrinking can take minutes);
# the failing example is printed as found, and the deep profile shrinks it.
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "deep",
    max_examples=2_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("CLAIMGRID_HYPOTHESIS", "ci"))

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

LANES = ("unit", "integration", "grid", "frameworks")
# Session grids read by tests in several files (fixtures below).
SHARED_GRIDS = ("default_grid", "ledger_grid")
# Per test, setup and teardown included (a session grid is built in its first reader's
# setup). Several times the slowest test of each lane on a loaded two-core machine: a
# hang fails with its traceback instead of running into the CI's own limit.
LANE_TIMEOUT_S = {"integration": 180, "grid": 600, "frameworks": 900}
# What a unit test may not do (audit events): start a process.
_PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn", "os.fork", "os.forkpty"}
)
_in_unit_test = False


class LazyModule:
    """A module imported on its first attribute use. Every xdist worker collects every test file,
    so a file-level ``import litellm`` (about 4 CPU-s) or ``import anthropic`` cost all four
    workers what only the one running that file's tests needs."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        if attr.startswith("_"):  # collection's probes of module globals (``__test__``, fixture marks)
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


def _lane_parts(item) -> tuple[str, ...]:
    """``item``'s path under tests/ as parts: ``("unit", "classify", "test_x.py")``."""
    try:
        return Path(item.path).resolve().relative_to(TESTS).parts
    except ValueError:
        return ()


def frameworks_needed(items, names, unnamed=None) -> set[str]:
    """The frameworks (of ``names``, the entries of ``venvs.toml``) whose venvs ``items`` use:
    a test parametrized by framework (``fw``) uses its own; a test under
    ``tests/frameworks/<name>/`` uses that one; any other test uses ``unnamed`` (default:
    them all)."""
    unnamed = set(names) if unnamed is None else set(unnamed)
    need: set[str] = set()
    for item in items:
        fw = getattr(getattr(item, "callspec", None), "params", {}).get("fw")
        parts = _lane_parts(item)
        if fw in names:
            need.add(fw)
        elif len(parts) > 2 and parts[0] == "frameworks" and parts[1] in names:
            need.add(parts[1])
        else:
            need |= unnamed
    return need


def pytest_itemcollected(item):
    """The lane of a test is its folder: its marker, and its timeout unless it sets one."""
    parts = _lane_parts(item)
    if not parts:
        return
    if len(parts) < 2 or parts[0] not in LANES:
        raise pytest.UsageError(f"{item.nodeid}: a test lives in one of the lanes tests/{{{','.join(LANES)}}}/")
    lane = parts[0]
    item.add_marker(lane)
    if lane in LANE_TIMEOUT_S and item.get_closest_marker("timeout") is None:
        item.add_marker(pytest.mark.timeout(LANE_TIMEOUT_S[lane]))
    # The xdist group (pyproject's addopts: --dist loadgroup): a test file is one group, so
    # its module fixtures are built once (one group per framework where the file's ``fw`` is
    # itself a module fixture parametrised by framework: each framework's fixture is built
    # once, and the frameworks spread over the workers); the readers of a shared session grid
    # are one group per grid, so each grid is built once per session, not once per worker.
    shared = [name for name in SHARED_GRIDS if name in getattr(item, "fixturenames", ())]
    fw = getattr(getattr(item, "callspec", None), "params", {}).get("fw")
    fw_defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get("fw") or ()
    per_fw = isinstance(fw, str) and any(d.scope != "function" for d in fw_defs)
    group = shared[0] if shared else item.nodeid.split("::", 1)[0] + (f"+{fw}" if per_fw else "")
    item.add_marker(pytest.mark.xdist_group(group))
    _join_xdist_group(item, group)


def _join_xdist_group(item, group: str, leaving: str | None = None) -> None:
    """Put ``item`` in its xdist group on a worker (moving it out of ``leaving``). The group is
    the documented ``xdist_group`` mark; pytest-xdist 3.8 (the newest release) carries it to the
    scheduler as a ``@group`` suffix written into ``item._nodeid``, which pytest 9.2 no longer
    reads (its node id is ``item._id``): with the mark alone ``--dist loadgroup`` silently
    spreads every group over the workers (each worker builds its own copy of a shared grid or a
    module fixture). Upstream: pytest-dev/pytest-xdist issue 1386, open, with the fix in pull
    request 1388 (it writes ``_id`` as this does). The suffix is written where this pytest reads
    it; xdist's own write stays harmless. Once an xdist release carries the fix, this write
    goes (tests/unit/test_xdist_groups.py fails if the group is lost either way)."""
    if leaving is not None:
        item.add_marker(pytest.mark.xdist_group(group), append=False)  # the closest mark: _group_of
    if not getattr(item.config.option, "loadgroup", False) or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import NodeId

    base = item.nodeid.removesuffix(f"@{leaving}") if leaving is not None else item.nodeid
    item._id = NodeId.parse(f"{base}@{group}")


def _refuse_processes_in_unit_tests(event, args):
    if _in_unit_test and event in _PROCESS_EVENTS:
        raise RuntimeError(f"a unit test started a process ({event}): it belongs in tests/integration/")


sys.addaudithook(_refuse_processes_in_unit_tests)


@pytest.hookimpl(tryfirst=True, wrapper=True)  # outside pytest-timeout's wrapper: a build is not the test's time
def pytest_runtest_protocol(item, nextitem):
    global _in_unit_test
    if item.get_closest_marker("frameworks") and _framework_venvs_needed.get(item.nodeid):
        _build_framework_venvs(_framework_venvs_needed.pop(item.nodeid))
    if (extra := item.get_closest_marker("extra")) is not None:
        from tests import extras

        extras.wait(extra.args[0])  # .ci/run's background install of it (tests/extras.py)
    _in_unit_test = item.get_closest_marker("unit") is not None
    try:
        return (yield)
    finally:
        _in_unit_test = False


@pytest.fixture(scope="session")
def tasks():
    return load_tasks()


@pytest.fixture(scope="session", autouse=True)
def _session_tmpdir(tmp_path_factory):
    """Every temporary folder of the session (the harness's own ``claimgrid-*`` and
    ``cg-warm-*`` folders, in this process and in the ``grid.py`` processes it starts) goes
    under pytest's basetemp, so a run that is killed (or a folder a test forgets) never
    lands in the machine's /tmp. The folder is called ``tmp`` as /tmp is (test_grid_interrupt
    recognises the harness's folders by that parent). Tests that need their own TMPDIR
    (tests/grid/commands/test_bad_input.py) still set one, for a command in process or a
    subprocess."""
    folder = tmp_path_factory.getbasetemp() / "tmp"
    folder.mkdir(exist_ok=True)
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(folder), str(folder)
    # The publisher key that seals the session's ledgers (claimgrid.store.seal): the session's
    # own, never the user's (~/.config/claimgrid); grid.py processes inherit it.
    saved_key = os.environ.get("CLAIMGRID_KEY")
    os.environ["CLAIMGRID_KEY"] = str(tmp_path_factory.getbasetemp() / "publisher-key" / "ed25519.pem")
    yield folder
    if saved_key is None:
        os.environ.pop("CLAIMGRID_KEY", None)
    else:
        os.environ["CLAIMGRID_KEY"] = saved_key
    tempfile.tempdir = saved_tempdir
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env


@pytest.fixture(autouse=True)
def _registry_restored():
    """A test that loads a policies file in-process (``main(["run", "--policies", ...])``)
    registers models for the whole worker; they are removed after the test, so that no later
    test in the same worker sees another test's models (the registry is the grid's input)."""
    from claimgrid.reference import registry

    saved = (dict(registry._REGISTRY), set(registry._LOADED), dict(registry._FILES))
    yield
    for live, kept in zip((registry._REGISTRY, registry._LOADED, registry._FILES), saved):
        live.clear()
        live.update(kept)


@pytest.fixture(scope="session")
def plain_venvs(tmp_path_factory):
    """A venvs.toml holding only the dependency-free ``plain`` framework (cheap grid checks)."""
    path = tmp_path_factory.mktemp("venvs") / "venvs.toml"
    path.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n'
    )
    return path


@pytest.fixture(scope="session")
def default_grid(tmp_path_factory, plain_venvs):
    """Every distinct cell of the default matrix (all tasks, conditions and default models),
    once, on the dependency-free ``plain`` framework, through ``grid.py run`` in process.
    Read by tests/grid/classify/test_validity_grid.py (calibration, blinding, reclassify) and, as the
    control grid without the hostile framework, by tests/frameworks/test_guard_attacks.py."""
    from claimgrid.commands.cli import main

    out = tmp_path_factory.mktemp("default-grid") / "ledger"
    # --jobs 4 on two cores: the four `slow` fault runs sleep past their 15 s deadline; more
    # slots than cores let the other runs go on meanwhile (jobs is not a parity fact).
    assert main(["run", "--venvs", str(plain_venvs), "--out", str(out), "--jobs", "4", "--no-progress"]) == 0
    return out


def select_runs(folder: Path, args: list[str]) -> list[dict]:
    """The records of the grid in ``folder`` that a ``grid.py run`` selection (``--tasks``,
    ``--content``, ``--swap``, ``--models``: comma-separated) picks, as dicts."""
    from claimgrid.store.lines import read_runs

    flags = {"--tasks": "task", "--content": "content", "--swap": "swap", "--models": "model"}
    want = {flags[flag]: set(value.split(",")) for flag, value in zip(args[::2], args[1::2])}
    assert set(want) == set(flags.values()), args
    runs = read_runs(folder / "runs.jsonl").values
    return [r for r in runs if all(r[key] in values for key, values in want.items())]


@pytest.fixture(scope="session")
def ledger_grid(tmp_path_factory):
    """The ledger tests' real grid (tests/ledger_support.py): built once per session, shared
    by tests/grid/ledger/test_ledger_render.py and tests/grid/ledger/test_ledger_browser.py; treat it as read-only
    (``ledger_support.copy_ledger`` gives a writable copy). A failed build fails every test
    that reads it with the same message, without building it again."""
    from .ledger_support import build_ledger

    return build_ledger(tmp_path_factory.mktemp("ledger-grid"))


@pytest.fixture
def workspace(tmp_path, tasks):
    """Factory: ``workspace(task_id, slot_text=None) -> (template, ws, base_commit)``."""

    def make(task_id: str, slot_text: str | None = None):
        task = tasks[task_id]
        template = tmp_path / f"template-{task_id}"
        base = build_template(task, task.slot_text() if slot_text is None else slot_text, template)
        ws = tmp_path / f"ws-{task_id}"
        materialise(template, ws)
        return template, ws, base

    return make


# Session grids that tests in several files read: every reader runs on the same xdist
# worker, so each grid is built once per session, not once per worker.
SHARED_GRIDS = ("default_grid", "ledger_grid")


# The framework venvs each selected ``frameworks`` test of this process needs (node id -> names),
# built before that test runs (``_build_framework_venvs``), so a worker's first framework test
# waits for its own venvs, not for every venv the worker's later tests use.
_framework_venvs_needed: dict[str, list[str]] = {}
_framework_venvs_built: set[str] = set()


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: build only what will run
def pytest_collection_modifyitems(config, items):
    """Note the framework venvs the selected tests need (no silent skips), and build the
    tasks' own environments.

    The venvs are built as ``uv run grid.py`` builds them (``uv sync --locked`` per
    framework, skipped when the lock has not changed; a bounded pool at a time), each before
    the first ``frameworks`` test of this process that uses it runs, not at collection: the
    unit, integration and grid lanes run meanwhile, so a fresh machine's downloads and
    installs overlap tests instead of holding every worker, and a worker whose next test uses
    one framework waits for that venv alone. A failed build stops the session with its
    one-line cause. Only the venvs the selected ``frameworks`` tests use are built
    (``frameworks_needed``): ``-k NAME`` builds NAME's alone.
    """
    if os.environ.get("CLAIMGRID_DEEP") != "1":
        # Re-proofs of what a cheaper test also checks (a whole grid again, a framework's own
        # default back-off waited out): the suite on two cores has to fit CI's limit;
        # `CLAIMGRID_DEEP=1 uv run --group dev pytest` runs them too.
        deep = pytest.mark.skip(reason="deep check (a whole grid or a back-off again): set CLAIMGRID_DEEP=1 to run it")
        for item in items:
            if item.get_closest_marker("deep"):
                item.add_marker(deep)
    if hasattr(config, "workerinput"):
        _longest_groups_first(items, int(config.workerinput.get("workercount", 1)))
    # What will run: a deep check is skipped (above) unless CLAIMGRID_DEEP=1, and then its venvs are built too.
    marked = [item for item in items if item.get_closest_marker("frameworks") and not item.get_closest_marker("skip")]
    if not marked:
        return
    from claimgrid.errors import ClaimgridError
    from claimgrid.inputs.venvs import load_venvs

    try:
        entries = load_venvs()
        # A test that names no framework runs the library ones: a coding agent with its own tools
        # (kind = "cli", an npm install of hundreds of MB) is built only for the tests that name
        # it (its conformance and attack checks, deep), not for every run of the suite.
        library = {name for name, e in entries.items() if not e.is_cli}
        # Each xdist worker builds what its tests need; each starts at a different venv (the
        # per-venv lock makes the others wait and then find it current), so a fresh machine
        # builds different venvs on different workers at once instead of all of them one by one.
        order = list(entries)
        worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
        start = int(worker.group(1)) % len(order) if worker else 0
        order = order[start:] + order[:start]
        _framework_venvs_needed.clear()
        for item in marked:
            need = frameworks_needed([item], set(entries), library)
            _framework_venvs_needed[item.nodeid] = [name for name in order if name in need]
        # The tasks' own locked environments now (tasks with pyproject.toml + uv.lock), as
        # `uv run grid.py` builds them: a test of any lane may run any shipped task.
        from claimgrid.inputs.tasks import ensure_task_envs, load_tasks

        ensure_task_envs(load_tasks().values())
    except ClaimgridError as exc:
        pytest.exit(f"framework venvs or task environments could not be built: {exc}", returncode=3)


# What a work unit (one xdist group) is expected to cost, for the order in which the scheduler
# hands them out, never for a result: seconds per test by lane and per group set-up, rounded
# from the suite's own durations (two cores, 2026-12-01).
_LANE_S = {"unit": 0.04, "integration": 0.7, "grid": 1.0, "frameworks": 1.0}
_SESSION_GRID_S = 150.0  # a shared session grid, built in its first reader's set-up
_FRAMEWORK_GRID_S = 30.0  # a module fixture per framework: a small real grid on it
# A group that waits at least this long (a framework's back-off, a declared ``waits_s``) goes to a
# waiting lane. Not a share of its cost: the coding agents' attack groups wait 30 s beside ~30 s
# of agent runs that are themselves mostly waits (their CPU was a tenth of their wall time).
_WAITING_S = 20.0


def _longest_groups_first(items, workers: int) -> None:
    """Order ``items`` so that xdist hands out the costliest groups first (longest processing
    time first: a long group that starts last is the session's tail, while short ones fill
    the gaps at the end). A group's items keep their order; pyproject's addopts turn xdist's
    own reordering (by test count) off, so this order is the one the workers get. A group's
    cost is estimated from what the items say: their lane, a session grid they read, a
    module's declared set-up (``@pytest.mark.setup_s(seconds)``), a
    per-framework module fixture and that framework's documented retry back-off
    (``venvs.toml`` ``retry_backoff_s``: a wait no core spends, best started early). Deep
    and skipped items cost nothing.

    Groups that wait at least ``_WAITING_S`` (that back-off, a declared ``@pytest.mark.waits_s``) are
    packed into ``workers // 2`` groups of their own (``waits-<k>``, longest first into the
    least loaded), so at most half the workers wait at once while the others keep the cores
    busy. Handed out one by one, the waiting groups (Strands' and smolagents' back-offs, the
    coding agents' hanging runs) landed on every worker at once: the two cores stood idle for
    tens of seconds while cheaper work queued behind them (xdist gives a worker its next
    group before its last two tests end)."""
    from claimgrid.inputs.venvs import load_venvs

    backoff = {name: e.retry_backoff_s for name, e in load_venvs().items()}
    cost: dict[str, float] = {}
    waits: dict[str, float] = {}
    declared_waits: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        group = _group_of(item)
        first.setdefault(group, index)
        if item.get_closest_marker("skip"):  # deep checks outside CLAIMGRID_DEEP=1 among them
            cost.setdefault(group, 0.0)
            continue
        parts = _lane_parts(item)
        lane_cost = _LANE_S.get(parts[0] if parts else "", 0.0)
        if group not in cost or cost[group] == 0.0:
            setup = 0.0
            declared = item.get_closest_marker("setup_s")  # a module's own grid, not a shared one
            if declared is not None:
                setup = float(declared.args[0])
            elif group in SHARED_GRIDS:
                setup = _SESSION_GRID_S
            elif "+" in group:  # a per-framework module fixture's group (pytest_itemcollected)
                waits[group] = backoff.get(group.rsplit("+", 1)[1], 0.0)
                setup = _FRAMEWORK_GRID_S + waits[group]
            cost[group] = cost.get(group, 0.0) + setup
        cost[group] += lane_cost
        declared_wait = item.get_closest_marker("waits_s")  # a module's mark is on each of its tests: counted once
        if declared_wait is not None:
            declared_waits[group] = max(declared_waits.get(group, 0.0), float(declared_wait.args[0]))
    for group, wait in declared_waits.items():
        cost[group] += wait
        waits[group] = waits.get(group, 0.0) + wait
    ranked = sorted(cost, key=lambda g: (-cost[g], first[g]))
    lanes = [f"waits-{k}" for k in range(max(1, workers // 2))]
    load = dict.fromkeys(lanes, 0.0)
    lane_of: dict[str, str] = {}
    for group in ranked:
        if cost[group] > 0 and waits.get(group, 0.0) >= _WAITING_S:
            lane = min(lanes, key=lambda k: (load[k], k))
            lane_of[group], load[lane] = lane, load[lane] + cost[group]
    # Within a waiting lane its groups go longest first (their own ranks, below the lane's).
    own_rank = {group: rank for rank, group in enumerate(ranked)}
    within = {id(item): own_rank[_group_of(item)] for item in items}
    for item in items:
        group = _group_of(item)
        if group in lane_of:
            _join_xdist_group(item, lane_of[group], leaving=group)
            first.setdefault(lane_of[group], first[group])
    for group, lane in lane_of.items():
        cost[lane] = load[lane]
        del cost[group]
    order = {group: rank for rank, group in enumerate(sorted(cost, key=lambda g: (-cost[g], first[g])))}
    keys = {id(item): (order[_group_of(item)], within[id(item)]) for item in items}
    items.sort(key=lambda item: keys[id(item)])  # stable: a group's items keep their order


def _group_of(item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker and marker.args else item.nodeid.split("::", 1)[0]


def _build_framework_venvs(names: list[str]) -> None:
    """Build (or find current) the venvs of ``names`` this process has not built yet, a
    bounded pool at a time (claimgrid.inputs.venvs.build_all), in the order given."""
    from claimgrid.errors import ClaimgridError
    from claimgrid.inputs.venvs import build_all, load_venvs

    todo = [name for name in names if name not in _framework_venvs_built]
    if not todo:
        return
    try:
        entries = load_venvs()
        build_all({name: entries[name] for name in todo}, in_order=True)
    except ClaimgridError as exc:
        pytest.exit(f"framework venvs could not be built: {exc}", returncode=3)
    _framework_venvs_built.update(todo)
