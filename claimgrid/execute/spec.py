"""The typed shapes of a grid: what defines it, what may change when it is resumed, what one
cell's run comes back as, what the engine reports, and its ``meta.json``.

* :class:`GridSpec` (frozen): everything that defines a grid — the selection, the per-run
  limits, the isolation, the guard mode, the policy files, the verify cache, the spend limits,
  the provider retry policy and the data folders. ``grid.py run`` builds it from its flags;
  ``--resume`` rebuilds it from ``meta.json`` (:meth:`GridSpec.from_meta`) and compares the one
  the flags ask for with it (:meth:`GridSpec.differs_from`).
* :class:`RunSettings` (frozen): how this invocation runs the grid (jobs, runs in flight,
  provider connections, backend and address, progress bar); free to change on every resume.
* :class:`GridInputs`: the loaded data the spec names (tasks, conditions, framework entries
  and versions) and the detected guard; built once by the command, shared by the engine.
* :class:`CellResult`: one cell's run as a node returns it: a record with its evidence files,
  or a harness error, or not started (budget reached), or interrupted (Ctrl-C).
* :class:`GridReport`: what the engine did, for the command to put in ``meta.json``.
* :class:`GridMeta`: ``meta.json``, validated whenever it is written; files written before a
  key existed still read (every key but the ones a resume needs has a default).

Nothing here reads a command line: the commands build these from their flags.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claimgrid import caps
from claimgrid.store.record import RunRecord

# The allowed ranges of the grid-defining values (the flags check them as they are parsed;
# meta.json is checked against them when a grid is resumed). README "Choosing a grid" states them.
MAX_TIMEOUT_S = 86_400.0  # one day per run
MAX_MODEL_CALLS = 10_000
MAX_REPEATS = 1_000
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_MODEL_CALLS = 24
DEFAULT_REPEATS = 1
DEFAULT_ISOLATION: Literal["warm", "fresh"] = "warm"
DEFAULT_SUITE = "default"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Selection(_Frozen):
    """Which cells the grid crosses: meta.json ``selection`` (``suite`` added later: default
    ``"default"`` for folders written before). ``tasks`` is already resolved from the suite."""

    frameworks: tuple[str, ...] = Field(min_length=1)
    tasks: tuple[str, ...] = Field(min_length=1)
    content: tuple[str, ...] = Field(min_length=1)
    swap: tuple[str, ...] = Field(min_length=1)
    models: tuple[str, ...] = Field(min_length=1)
    substitute: str
    repeats: int = Field(ge=1, le=MAX_REPEATS)
    suite: str = DEFAULT_SUITE

    @property
    def all_models(self) -> list[str]:
        """The assigned models and the substitute (what the gateway may be asked to serve)."""
        return [*self.models, self.substitute]

    def size(self) -> int:
        """The number of cells before the registry's condition limits (``plan`` drops some)."""
        n = self.repeats
        for names in (self.frameworks, self.tasks, self.content, self.swap, self.models):
            n *= len(names)
        return n


class Budget(_Frozen):
    """The grid's spend limits (None: no limit); meta.json ``budget``."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def limits(self):
        from claimgrid.gateway.budget import Limits

        return Limits(self.max_cost_usd, self.max_tokens)


class ProviderRetry(_Frozen):
    """Retries of a real provider's transient error inside the gateway; meta.json ``provider_retry``."""

    retries: int = 4
    backoff_s: float = 1.0
    max_wait_s: float = 60.0
    timeout_s: float = 300.0

    def policy(self):
        from claimgrid.gateway.retry import RetryPolicy

        return RetryPolicy(**self.model_dump())


class DataDirs(_Frozen):
    """Where the grid's data is read from (each node reads its own copy at the same paths)."""

    tasks_dir: str
    conditions_dir: str
    venvs: str


class ModelLimits(BaseModel):
    """One model's limits in a grid (meta.json ``limits``, each record's ``parity.limits``).
    ``None``: no such limit (a reference model has no output cap and no token budget)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_timeout_s: float = Field(gt=0, le=caps.MAX_CALL_TIMEOUT_S, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1, le=caps.MAX_OUTPUT_TOKENS)
    max_model_calls: int = Field(ge=1, le=MAX_MODEL_CALLS)
    max_run_tokens: int | None = Field(default=None, ge=1, le=caps.MAX_RUN_TOKENS)
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    # Where each value came from: default | code | <file>:<glob> | flag (shown in the banner).
    source: dict[str, str] = Field(default_factory=dict)

    def client_deadline_s(self, real: bool) -> float:
        """The deadline the adapter gives its model client: the gateway's plus a margin for a
        real model (the gateway ends the call first and records it), the gateway's for a
        reference model (whose ``slow`` fault is sized against it)."""
        return self.call_timeout_s + caps.CLIENT_DEADLINE_MARGIN_S if real else self.call_timeout_s

    def facts(self) -> dict:
        """The values without their sources (parity: runs pool only under equal limits)."""
        return self.model_dump(exclude={"source"})

    def served(self, deadline_s: float | None, server_cap: int | None) -> ModelLimits:
        """These limits on a model the driver serves itself (claimgrid.localmodel): its measured
        per-call deadline replaces a default one (a flag or limits file still wins), and its
        server's output cap, which the server applies whatever it is asked, is the cap in force
        when it is the lower one. Recorded and shown as in force, so a cut answer is reported
        at the cap that cut it."""
        update: dict = {}
        source = dict(self.source)
        if deadline_s is not None and source.get("call_timeout_s", "default") == "default":
            update["call_timeout_s"], source["call_timeout_s"] = float(deadline_s), "measured"
        if server_cap is not None and (self.max_output_tokens is None or server_cap < self.max_output_tokens):
            update["max_output_tokens"], source["max_output_tokens"] = int(server_cap), "model server"
        return self.model_copy(update={**update, "source": source}) if update else self


class GridSpec(_Frozen):
    """Everything that defines a grid. Two grids with equal specs run the same cells the same way.

    A resume may change only the fields in :data:`RESUME_MAY_CHANGE` (a higher budget after
    a stop, the retry policy, this invocation's guard mode and verify cache, more policy
    files, the data folders, which are checked by name and hash); any other field given with
    another value than the stored one is refused, naming its flag."""

    selection: Selection
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    isolation: Literal["warm", "fresh"] = DEFAULT_ISOLATION
    max_model_calls: int = Field(default=DEFAULT_MAX_MODEL_CALLS, ge=1, le=MAX_MODEL_CALLS)
    guard_mode: Literal["auto", "on", "off"] = "auto"
    policies: tuple[str, ...] = ()
    verify_cache: bool = True
    budget: Budget = Budget()
    provider_retry: ProviderRetry = ProviderRetry()
    # Each model's limits, resolved once (claimgrid.execute.model_limits); empty: the grid-wide
    # timeout_s / max_model_calls with the reference deadline (a grid from before per-model limits).
    limits: dict[str, ModelLimits] = Field(default_factory=dict)
    data: DataDirs

    @classmethod
    def from_meta(cls, meta: dict, data: DataDirs, guard_mode: str = "auto") -> GridSpec:
        """The spec a stored grid was run with (``meta.json``, already checked by ``StoredMeta``).

        The data folders and guard mode are not stored as such: the caller says them."""
        return cls(
            selection=Selection(**{k: v for k, v in meta["selection"].items() if k in Selection.model_fields}),
            timeout_s=meta["timeout_s"],
            max_model_calls=meta["max_model_calls"],
            isolation=meta.get("isolation", DEFAULT_ISOLATION),
            guard_mode=guard_mode,
            policies=tuple(meta.get("policies") or ()),
            verify_cache=meta.get("verify_cache", "on") != "off",
            budget=Budget(**(meta.get("budget") or {})),
            provider_retry=ProviderRetry(**(meta.get("provider_retry") or {})),
            limits={m: ModelLimits(**v) for m, v in (meta.get("limits") or {}).items()},
            data=data,
        )

    def differs_from(self, stored: GridSpec) -> str | None:
        """The first field (dotted, e.g. ``selection.tasks``) whose value differs from
        ``stored``'s, outside :data:`RESUME_MAY_CHANGE`; the selection's names compare as sets
        (``--tasks b,a`` is the grid of ``a,b``)."""
        for name in type(self).model_fields:
            if name in RESUME_MAY_CHANGE:
                continue
            mine, theirs = getattr(self, name), getattr(stored, name)
            if name == "selection":
                for key in Selection.model_fields:
                    a, b = getattr(mine, key), getattr(theirs, key)
                    if (sorted(a) != sorted(b)) if isinstance(a, tuple) else a != b:
                        return f"selection.{key}"
            elif mine != theirs:
                return name
        return None

    def meta(self) -> dict:
        """The keys of ``meta.json`` that record the spec (docs/ledger-readers.md, "Grid meta")."""
        sel = self.selection.model_dump(mode="json")
        return {
            "models": sel["models"],
            "substitute": sel["substitute"],
            "tasks": sel["tasks"],
            "content": sel["content"],
            "swap": sel["swap"],
            "repeats": sel["repeats"],
            "timeout_s": self.timeout_s,
            "isolation": self.isolation,
            "max_model_calls": self.max_model_calls,
            "policies": list(self.policies),
            "selection": sel,
            "verify_cache": "on" if self.verify_cache else "off",
            "budget": self.budget.model_dump(),
            "provider_retry": self.provider_retry.model_dump(),
            "limits": {m: lim.model_dump() for m, lim in self.limits.items()},
        }

    def limits_for(self, model: str) -> ModelLimits:
        """``model``'s limits in this grid (a grid from before per-model limits: its timeout and
        model-call budget, the reference deadline, no cap and no token budget)."""
        if model in self.limits:
            return self.limits[model]
        return ModelLimits(
            call_timeout_s=caps.REFERENCE_CALL_TIMEOUT_S, max_model_calls=self.max_model_calls, timeout_s=self.timeout_s
        )


# Fields of GridSpec a resume may give anew (see GridSpec).
RESUME_MAY_CHANGE = frozenset({"guard_mode", "policies", "verify_cache", "budget", "provider_retry", "data"})


class RunSettings(_Frozen):
    """How this invocation runs the grid; a resume may change every one of these."""

    jobs: int = Field(ge=1)
    max_inflight: int = Field(ge=1)
    connections_default: int = 10
    connections: tuple[tuple[str, int], ...] = ()
    backend: Literal["local", "ray"] = "local"
    address: str | None = None
    node_jobs: int | None = None  # --backend ray: runs at once per node (None: each node's CPU count)
    node_max_inflight: int | None = None  # --backend ray: --max-inflight as given, a cap per node
    progress: bool = True
    claim_judge: str | None = None  # --claim-judge MODEL: a second reader of each report, never deciding

    @property
    def schedule(self):
        """The admission limits (claimgrid.execute.admission.Schedule) of these settings."""
        from claimgrid.execute.admission import Schedule

        return Schedule(self.jobs, self.max_inflight, self.connections_default, self.connections)


@dataclass(frozen=True)
class GridInputs:
    """The loaded data a spec names: tasks, conditions, the selected frameworks' entries and
    their versions, and the guard detected with the spec's mode (None: detect on the node)."""

    tasks: dict
    content: dict
    swap: dict
    entries: dict
    framework_versions: dict = field(default_factory=dict)
    guard: Any = None
    # The framework venvs building in the background (claimgrid.inputs.venvs.Builds; the local
    # backend starts a framework's cells once its venv is ready). None: every venv is built.
    builds: Any = None
    # Models the driver serves itself (claimgrid.localmodel): model -> per-call deadline (s),
    # and model -> the server's parity facts (engine, weights, template, settings).
    call_deadlines: dict = field(default_factory=dict)
    served_models: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Replay:
    """``grid.py replay``: serve the recorded exchanges of ``folder``; each run keeps its
    recorded delegation id (``run_id -> id``), since it is part of every request."""

    folder: str
    delegations: dict = field(default_factory=dict)


class CellStatus(enum.Enum):
    """How one cell's run ended, as its node reports it."""

    DONE = "done"  # a record and its evidence files
    HARNESS_ERROR = "harness error"  # a harness bug in this cell: nothing stored, --resume re-runs it
    NOT_STARTED = "not started: budget reached"
    INTERRUPTED = "interrupted"  # Ctrl-C killed it: nothing stored


@dataclass(frozen=True)
class CellResult:
    """One cell's run: ``record`` and ``files`` when DONE, ``error`` when HARNESS_ERROR."""

    status: CellStatus
    record: RunRecord | None = None
    files: dict | None = None
    error: str | None = None

    @classmethod
    def done(cls, record: RunRecord, files: dict | None) -> CellResult:
        return cls(CellStatus.DONE, record, files)

    @classmethod
    def harness_error(cls, error: str) -> CellResult:
        return cls(CellStatus.HARNESS_ERROR, error=error)

    @classmethod
    def not_started(cls) -> CellResult:
        return cls(CellStatus.NOT_STARTED)

    @classmethod
    def interrupted(cls) -> CellResult:
        return cls(CellStatus.INTERRUPTED)


@dataclass
class GridReport:
    """What one ``execute`` did, for meta.json: runs lost with a node, harness errors
    (``{"run_id", "error"}``), each framework's runtime versions first seen, the scheduler's
    and the executions' facts, a stop at budget, the spend so far (every run in the folder),
    the gateway thread's CPU, and the storage error that stopped the grid (None: none)."""

    lost: int = 0
    harness_errors: list[dict] = field(default_factory=list)
    retries: dict = field(default_factory=dict)
    scheduler: dict | None = None
    executions: list[dict] = field(default_factory=list)
    stopped_at_budget: dict | None = None
    spend: dict | None = None
    gateway_cpu_s: float | None = None
    storage_error: OSError | None = None
    # Framework venvs whose build failed: {"framework", "error", "runs_not_started"}; their
    # cells were not started (--resume runs them once the venv builds).
    venv_failures: list[dict] = field(default_factory=list)
    venv_builds: dict | None = None  # claimgrid.inputs.venvs.Builds.facts(): each venv's state and times


class GridMeta(BaseModel):
    """``meta.json`` (docs/ledger-readers.md, "Grid meta"). Validated whenever it is written;
    :meth:`dump` writes back exactly the keys that were set, so an older file keeps its shape.
    Keys this model does not name (a later version's) are kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    grid_id: str
    command: str = ""
    # A replay's folder: which ledger it replays, and what the replay found (grid.py replay).
    replay_of: dict[str, Any] | None = None
    replay: dict[str, Any] | None = None
    started: str | None = None
    finished: str | None = None
    wall_s: float | None = None
    claimgrid_commit: str | None = None
    python: str | None = None
    platform: str | None = None
    frameworks: dict[str, dict] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=list)
    substitute: str | None = None
    tasks: list[str] = Field(default_factory=list)
    task_provenance: dict[str, Any] = Field(default_factory=dict)
    content: list[str] = Field(default_factory=list)
    swap: list[str] = Field(default_factory=list)
    repeats: int | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    jobs: int | None = Field(default=None, ge=1)
    isolation: Literal["warm", "fresh"] | None = None
    max_model_calls: int | None = Field(default=None, ge=1, le=MAX_MODEL_CALLS)
    retries: dict[str, dict] = Field(default_factory=dict)
    grid_size: int | None = None
    # The planned run ids (claimgrid.execute.cells.plan), in plan order: what a sealed ledger's
    # lines are checked against (claimgrid.store.seal). None in grids written before it.
    plan: list[str] | None = None
    reference_models: bool | None = None
    policies: list[str] = Field(default_factory=list)
    # Each --policies file the grid imported: {"path", "sha256", "models"}. A reader names the
    # file again (--policies) and it must have this sha256: nothing in the folder is imported.
    policy_files: list[dict[str, Any]] = Field(default_factory=list)
    schedule: dict[str, Any] | None = None
    selection: dict[str, Any] | None = None
    resumed: list[str] = Field(default_factory=list)
    # The claimgrid commit each resume ran on, in the order of ``resumed`` (the runs a resume
    # adds are that code's, not ``claimgrid_commit``'s). Empty in grids written before it.
    resumed_commits: list[str | None] = Field(default_factory=list)
    guard: dict[str, Any] | None = None
    verify_cache: Literal["on", "off"] = "on"
    swap_conditions: dict[str, dict] = Field(default_factory=dict)
    hashes: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] | None = None
    provider_retry: dict[str, Any] | None = None
    # Each model's limits (claimgrid.execute.model_limits.ModelLimits, with where each value came from).
    limits: dict[str, dict] | None = None
    spend: dict[str, Any] | None = None
    stopped_at_budget: dict[str, Any] | None = None
    task_facts: dict[str, dict] = Field(default_factory=dict)  # claimgrid.ledger.facts.grid_facts
    content_facts: dict[str, dict] = Field(default_factory=dict)
    # The tables the classifications were made with (claimgrid.classify.tables.table_facts).
    classification_tables: dict[str, dict] = Field(default_factory=dict)
    budget_stops: list[dict] = Field(default_factory=list)
    harness_errors: list[dict] = Field(default_factory=list)
    # This invocation's framework venv builds (state, built, started_s/ended_s since the grid's
    # start, error) and the failures among them with the runs they left unstarted (GridReport).
    venv_builds: dict[str, dict] | None = None
    venv_failures: list[dict] = Field(default_factory=list)
    executions: list[dict] = Field(default_factory=list)
    scheduler: dict[str, Any] | None = None
    cpu: dict[str, float] = Field(default_factory=dict)

    def dump(self) -> dict:
        """The JSON object to write: the keys set (read, given or assigned), in model order."""
        return self.model_dump(mode="json", exclude_unset=True)

    def add_report(self, report: GridReport) -> None:
        """What one ``execute`` did, into the meta (lists and CPU add up across resumes)."""
        if report.harness_errors:
            self.harness_errors = [*self.harness_errors, *report.harness_errors]
        new = {fw: v for fw, v in report.retries.items() if fw not in self.retries}
        if new:  # the first versions seen of each framework stay
            self.retries = {**self.retries, **new}
        if report.executions:
            self.executions = [*self.executions, *report.executions]
        if report.scheduler is not None:
            self.scheduler = report.scheduler
        if report.stopped_at_budget is not None:
            self.stopped_at_budget = report.stopped_at_budget
        if report.gateway_cpu_s is not None:
            self.add_cpu("gateway_thread_s", report.gateway_cpu_s)
        if report.venv_builds is not None:
            self.venv_builds = report.venv_builds
        # this invocation's: a resume whose build now succeeds clears an earlier failure
        if report.venv_failures or self.venv_failures:
            self.venv_failures = report.venv_failures

    def add_cpu(self, key: str, seconds: float) -> None:
        cpu = dict(self.cpu)
        cpu[key] = round(cpu.get(key, 0) + seconds, 3)
        self.cpu = cpu
