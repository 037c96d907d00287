"""Typed evidence events: one model per (source, kind) of docs/CONTRACTS.md, "Evidence events".

A run's ``events.jsonl`` is read as ``list[dict]`` (:mod:`claimgrid.store.folder`);
:func:`parse_events` turns those dicts into the models below, and the filters
(:func:`by_source`, :func:`of_kind`, :func:`last`, :func:`parse_as`) are how the
classifier, the ledger's digest and the verifier pick events out of a run.

Contract (records of every version load, nothing is lost, nothing is guessed):

* Every model is frozen. Keys a model does not name are kept as extra attributes
  (``model_extra``), e.g. fields added by a later version or the reader's ``_line``.
* A key a record leaves out reads as the field's default (``None`` for every payload
  field, i.e. "not recorded"), and is left out again by ``model_dump``.
* Validation is strict (``"200"`` is not ``200``; only an integer in a float field reads
  as that float). A value that fails it is kept as written, never coerced, never dropped
  (``model_dump`` then warns); readers see exactly what was recorded.
* A record (an event or a nested one) with no key at all is falsy, as the empty object is.
* An event of a kind this module does not know is its source's generic model
  (e.g. :class:`RuntimeEvent`); one of an unknown source is a plain :class:`Event`.
  Parsing never fails on a dict.
* Round trip: ``parse_event(d).model_dump() == d`` for every dict ``d`` read from JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Self, TypeVar, cast, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer, model_validator


def _repair(exc: ValidationError, data: dict, validate):
    """``data`` validated without the keys that failed, those keys then set as written."""
    bad = {err["loc"][0] for err in exc.errors() if err["loc"]}
    model = validate({k: v for k, v in data.items() if k not in bad})
    return model.model_copy(update={k: data[k] for k in bad if k in data})


class _Record(BaseModel):
    """Frozen, strict, extras kept, the record's own keys only on dump (module docstring)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler) -> dict[str, Any]:
        data = handler(self)
        given = self.model_fields_set
        if type(self) in _KIND_MODELS:  # a model of one kind names its source and kind
            given = given | {"source", "kind"}
        return {k: v for k, v in data.items() if k in given}

    def __bool__(self) -> bool:
        """False when the record holds no key at all, as the recorded empty object is."""
        return bool(self.model_fields_set)


class Payload(_Record):
    """A record nested in an event (a diff's file, a requested call, a trace ...); a field
    that fails validation keeps its value as written, at whatever depth."""

    @model_validator(mode="wrap")
    @classmethod
    def _keep_as_written(cls, data: Any, handler):
        try:
            return handler(data)
        except ValidationError as exc:
            if not isinstance(data, dict):
                raise  # the enclosing record keeps it as written
            return _repair(exc, data, handler)


class Event(_Record):
    """Any event; the generic model of an unknown source. Read records with :meth:`read`
    (or :func:`parse_event`), which never fails on a dict; ``model_validate`` is strict."""

    source: str | None = None
    kind: str | None = None

    @classmethod
    def read(cls, data: dict) -> Self:
        """``data`` as this model; a field that fails validation keeps its value as written."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            return _repair(exc, data, cls.model_validate)


# ------------------------------------------------------------------ source "agent"


class AgentEvent(Event):
    source: Literal["agent"] = "agent"


class Trace(Payload):
    """The agent's structured trace as :func:`claimgrid.trace.parse_trace` returned it: its
    own declaration, never evidence. Whatever other keys the agent wrote are extras."""

    status: str | None = None
    delegation_id: str | None = None
    parent_id: str | None = None
    agent: str | None = None
    tool_uses_count: int | None = None
    tool_uses_breakdown: dict[str, int] | None = None
    expected_evidence: str | None = None
    git_evidence: str | None = None
    review_verdict: str | None = None

    def declares(self, key: str) -> bool:
        """Did the agent write ``key`` (whatever its value)?"""
        return key in self.model_fields_set


class AgentReport(AgentEvent):
    kind: Literal["report"] = "report"
    text: str | None = None
    trace: Trace | None = None
    trace_error: str | None = None


# ------------------------------------------------------------------ source "runtime"


class RuntimeEvent(Event):
    """Written by the adapter from the framework's own runtime; ``agent`` is its attribution."""

    source: Literal["runtime"] = "runtime"
    agent: str | None = None
    agent_source: str | None = None
    t: float | None = None


class RuntimeToolCall(RuntimeEvent):
    kind: Literal["tool_call"] = "tool_call"
    tool: str | None = None
    args: Any = None
    failure: str | None = None


class RuntimeModelCall(RuntimeEvent):
    kind: Literal["model_call"] = "model_call"
    model: Any = None  # the name the framework saw; an adapter may record a non-string
    usage: Any = None
    transcript_model: Any = None
    tool_calls: list[Any] | None = None
    invalid_tool_calls: list[Any] | None = None


class RuntimeMessage(RuntimeEvent):
    kind: Literal["message"] = "message"
    role: str | None = None
    text: str | None = None


class RuntimeErrorEvent(RuntimeEvent):
    kind: Literal["error"] = "error"
    type: str | None = None
    message: str | None = None


class RuntimeLimits(RuntimeEvent):
    kind: Literal["limits"] = "limits"
    turn_limit: int | None = None
    unit: str | None = None
    enforced_by: str | None = None
    max_model_calls: int | None = None


class RuntimeRunProcesses(RuntimeEvent):
    """The adapter's reaper after the agent ended (frameworks/_harness/reaper.py): every process
    of the run killed and waited for before anything of the run is read back; ``mechanism``
    says how strong the guarantee is (a pid namespace, or only the adapter's descendants)."""

    kind: Literal["run_processes"] = "run_processes"
    mechanism: str | None = None
    killed: int | None = None
    left: int | None = None
    ended_unix: float | None = None
    took_s: float | None = None


# ------------------------------------------------------------------ source "gateway"


class GatewayEvent(Event):
    source: Literal["gateway"] = "gateway"


class Usage(Payload):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ProviderError(Payload):
    attempt: int | None = None
    status: int | None = None
    connection_error: bool | None = None
    error: str | None = None
    transient: bool | None = None
    retry_after_s: float | None = None
    wait_s: float | None = None
    latency_ms: float | None = None


class Provider(Payload):
    """A real provider's account of one call (null when a reference model served)."""

    model: str | None = None
    attempts: int | None = None
    retries: int | None = None
    failed: bool | None = None
    errors: list[ProviderError] | None = None


class RequestedCall(Payload):
    """A tool call in the model's answer, as the gateway returned it to the client."""

    id: str | None = None
    name: str | None = None
    arguments: str | None = None


class Replay(Payload):
    request_sha256: str | None = None
    recorded_sha256: str | None = None
    match: bool | None = None


class OutputCap(Payload):
    """The output-token cap the gateway set on a real model's call (claimgrid.execute.model_limits)."""

    cap: int | None = None
    requested: int | None = None  # what the client asked for (None: no bound)
    field: str | None = None  # the field its dialect spells it in
    applied: bool | None = None  # the cap lowered or set the bound (False: the client's was lower)


class LimitHit(Payload):
    """A run limit one call hit (``kind``: call_deadline | output_cap | turns | run_tokens | context)."""

    kind: str | None = None
    value: float | None = None
    used: int | None = None


class GatewayExchange(GatewayEvent):
    """One model request the gateway answered or refused."""

    kind: Literal["exchange"] = "exchange"
    call_index: int | None = None
    t: float | None = None
    stream: bool | None = None
    requested_model: Any = None  # whatever the client's body said
    assigned_model: str | None = None
    served_model: str | None = None
    reported_model: str | None = None
    swap: str | None = None
    status: int | None = None
    error: str | None = None
    latency_ms: float | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    tool_calls: list[RequestedCall] | None = None
    content: str | None = None
    finish_reason: str | None = None
    tool_results: list[str | None] | None = None
    tool_result_chars: list[int] | None = None  # lengths as sent, before the evidence caps
    tool_result_ids: list[str | None] | None = None  # the call id of each result (None in older records)
    messages_n: int | None = None
    provider: Provider | None = None
    fault: str | None = None
    delayed_s: float | None = None
    final_answer: str | None = None  # the text of a call of the framework's final-answer tool
    queued_ms: float | None = None
    replay: Replay | None = None
    dialect: str | None = None  # the API the client spoke (None: recorded before dialects existed)
    output_cap: OutputCap | None = None  # a real model's call: the cap set on it
    limit: LimitHit | None = None  # the run limit this call hit

    @property
    def answered(self) -> bool:
        return self.status == 200


class GatewayInFlight(GatewayEvent):
    """A real provider's call still unanswered when the run ended (its process exited or was
    killed while the gateway waited on the provider)."""

    kind: Literal["in_flight"] = "in_flight"
    call_index: int | None = None
    t: float | None = None
    open_s: float | None = None


class AgentToolCall(GatewayEvent):
    """One call of an agent's own tool (venvs.toml ``kind = "cli"``), derived by the harness from
    the gateway transcript: the call the model's answer carried, paired with the result the agent
    sent back in its next request (claimgrid.classify.evidence.own_tool_events), as the abstract
    action its tool table reads it as. ``agent_side``: the agent ran it, not the harness tool
    layer; nothing here was observed as it ran, only as the agent reported it back to the model
    (the result's text itself is in the exchange, not repeated here)."""

    kind: Literal["agent_tool_call"] = "agent_tool_call"
    agent_side: bool = True
    seq: int | None = None
    tool: str | None = None
    args: Any = None
    ok: bool | None = None
    error: str | None = None
    result_chars: int | None = None
    changed_workspace: bool | None = None  # from the turn snapshots (None: not taken)
    changed_paths: list[str] | None = None


# ------------------------------------------------------------------ source "tools"


class ToolsEvent(Event):
    source: Literal["tools"] = "tools"


class ToolCall(ToolsEvent):
    """One call the harness tool layer executed (or refused: ``ok`` false)."""

    kind: Literal["tool_call"] = "tool_call"
    seq: int | None = None
    t: float | None = None
    tool: str | None = None
    category: str | None = None
    args: Any = None  # the model's arguments; not an object when it sent none
    ok: bool | None = None
    error: str | None = None
    result: str | None = None
    result_chars: int | None = None
    changed_workspace: bool | None = None  # None: the snapshot failed
    changed_paths: list[str] | None = None
    harness_cpu_s: float | None = None
    exit_code: int | None = None
    timed_out: bool | None = None
    fault: str | None = None  # a probe's tool fault the tool layer applied to this call
    delivered_chars: int | None = None  # what the framework received when the fault altered it
    delayed_s: float | None = None  # a late fault: how long after the call its result was returned

    @property
    def arg_dict(self) -> dict:
        """``args`` when it is an object, else an empty one."""
        return self.args if isinstance(self.args, dict) else {}


# ------------------------------------------------------------------ source "verifier"


class VerifierEvent(Event):
    source: Literal["verifier"] = "verifier"


class DiffFile(Payload):
    path: str | None = None
    status: str | None = None
    added: int | None = None
    removed: int | None = None


class Diff(VerifierEvent):
    kind: Literal["diff"] = "diff"
    files: list[DiffFile] | None = None  # None: over a cap or not taken
    empty: bool | None = None
    error: str | None = None
    limit: bool | None = None
    tree: str | None = None
    expected: str | None = None
    git_dir: list[str] | None = None  # changes under .git beyond what git writes (also in files)
    oversized: list[str] | None = None  # over a cap: listed by path, content not read (also in files)


class RequiredFiles(VerifierEvent):
    kind: Literal["required_files"] = "required_files"
    missing: list[str] | None = None
    content_mismatch: list[str] | None = None


class Tests(VerifierEvent):
    kind: Literal["tests"] = "tests"
    command: list[str] | None = None
    exit_code: int | None = None
    passed: bool | None = None  # None: not known
    timed_out: bool | None = None
    guard: bool | None = None
    reason: str | None = None
    output_tail: str | None = None
    duration_s: float | None = None
    cache: str | None = None
    cached: bool | None = None
    cache_key: str | None = None
    verified_by: str | None = None
    detail: str | None = None
    # The tamper-evident run (claimgrid.verify.tamper): what the exit status, the runner's
    # report and the canaries showed; the restored run; the reasons the run was subverted.
    integrity: dict | None = None
    restored: dict | None = None
    changed_tests: list[str] | None = None
    tampered: bool | None = None
    subverted: list[str] | None = None
    impossible: bool | None = None


class Scope(VerifierEvent):
    kind: Literal["scope"] = "scope"
    outside_allowed: list[str] | None = None
    protected_touched: list[str] | None = None


class InstructionCheck(VerifierEvent):
    """The verifier's check of the instruction a condition carried: ``held`` (did its check
    hold at the end) and ``held_in_log`` (at some point of the tool log); None: not known."""

    applicable: bool | None = None
    detail: str | None = None

    @property
    def held(self) -> bool | None:
        raise NotImplementedError

    @property
    def held_in_log(self) -> bool | None:
        raise NotImplementedError


class AttackerGoal(InstructionCheck):
    kind: Literal["attacker_goal"] = "attacker_goal"
    achieved: bool | None = None
    achieved_in_log: bool | None = None

    @property
    def held(self) -> bool | None:
        return self.achieved

    @property
    def held_in_log(self) -> bool | None:
        return self.achieved_in_log


class LegitimateNote(InstructionCheck):
    kind: Literal["legitimate_note"] = "legitimate_note"
    followed: bool | None = None
    followed_in_log: bool | None = None

    @property
    def held(self) -> bool | None:
        return self.followed

    @property
    def held_in_log(self) -> bool | None:
        return self.followed_in_log


class Review(VerifierEvent):
    kind: Literal["review"] = "review"
    applicable: bool | None = None
    opened: list[str] | None = None
    opened_by: Any = None  # path -> rules; absent in older records
    coverage: Any = None  # path -> share of its lines the tools returned (partial reads too); absent in older records
    required_opened: list[str] | None = None
    verdict: str | None = None
    truth: str | None = None


class TurnChange(Payload):
    path: str | None = None
    change: str | None = None  # added | modified | removed


class TurnChanges(VerifierEvent):
    """The workspace's change over one interval between two snapshots of an agent with its own
    tools (claimgrid.verify.snapshots): the tool calls of the answer to ``after_call`` ran in it
    (None: before the first model call); ``before_call`` is the request the later snapshot was
    taken at (None: the agent's exit). ``changed`` / ``changed_n`` None: a snapshot was not
    taken, ``reason`` says why."""

    kind: Literal["turn_changes"] = "turn_changes"
    after_call: int | None = None
    before_call: int | None = None
    t: float | None = None
    changed: list[TurnChange] | None = None
    changed_n: int | None = None
    changed_cut: bool | None = None
    reason: str | None = None


# ------------------------------------------------------------------ source "process"


class ProcessEvent(Event):
    source: Literal["process"] = "process"


class ProcessExit(ProcessEvent):
    """How the adapter process ended, as the launcher saw it."""

    kind: Literal["exit"] = "exit"
    isolation: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    wall_s: float | None = None
    timed_out: bool | None = None
    outcome_status: str | None = None
    outcome_problem: str | None = None
    stderr_tail: str | None = None
    pid: int | None = None
    killed_processes: int | None = None
    leftovers_killed: int | None = None
    cpu_s: float | None = None
    adapter_exception: Any = None
    launch_error: str | None = None
    timeout_s: float | None = None  # the run's wall-time limit (None: recorded before it was)


class TranscriptTruncated(ProcessEvent):
    """A transcript read from elsewhere stops short (a torn line, no final record): the calls
    after its tear are not in the evidence (claimgrid.classify.transcripts ``truncated_reason``)."""

    kind: Literal["transcript_truncated"] = "transcript_truncated"
    reason: str | None = None


# ------------------------------------------------------------------ source "external"


class ExternalEvent(Event):
    """A verdict another harness recorded (``grid.py check --outcome-from``, ``grid.py audit``):
    trusted as that harness's verdict, below claimgrid's own verifier."""

    source: Literal["external"] = "external"


class ExternalOutcomeEvent(ExternalEvent):
    """The recorded verdict mapped to the outcome vocabulary (claimgrid.classify.outcomes):
    ``outcome`` (PASS, TESTS_FAIL or UNKNOWN), the ``form`` read, ``why``, the ``reward`` and
    test counts as recorded, the verdict file's ``path``."""

    kind: Literal["outcome"] = "outcome"
    outcome: str | None = None
    form: str | None = None
    why: str | None = None
    path: str | None = None
    reward: float | None = None
    passed: int | None = None
    failed: int | None = None


# ------------------------------------------------------------------ source "judge"


class JudgeEvent(Event):
    """A model asked to read the agent's report (``--claim-judge MODEL``): a second reader whose
    words have no authority; recorded and set against the deterministic reader, never deciding."""

    source: Literal["judge"] = "judge"


class JudgeClaimReading(JudgeEvent):
    """The judge's reading of the final report (claimgrid.classify.judge): the ``model`` asked,
    the ``prompt_version`` it was asked with, its ``stance`` (yes, no, partial, unclear; None:
    no answer in the constrained form, ``error`` says why) and the deciding ``sentence`` it
    quoted, its ``answer`` as given (capped)."""

    kind: Literal["claim_reading"] = "claim_reading"
    model: str | None = None
    prompt_version: str | None = None
    stance: str | None = None
    sentence: str | None = None
    error: str | None = None
    answer: str | None = None


# ------------------------------------------------------------------ parsing and filters

# The known events: a union tagged by (source, kind), each member's own defaults of the two
# fields (its tag). Parsing dispatches on the tag (:func:`model_for`); a new kind is one model
# above and one member here, and two members with one tag are an error at import.
KnownEvent = (
    AgentReport
    | RuntimeToolCall
    | RuntimeModelCall
    | RuntimeMessage
    | RuntimeErrorEvent
    | RuntimeLimits
    | RuntimeRunProcesses
    | GatewayExchange
    | GatewayInFlight
    | AgentToolCall
    | ToolCall
    | Diff
    | RequiredFiles
    | Tests
    | Scope
    | AttackerGoal
    | LegitimateNote
    | Review
    | TurnChanges
    | ProcessExit
    | TranscriptTruncated
    | ExternalOutcomeEvent
    | JudgeClaimReading
)
# Each source's generic model: an event of a kind not in KnownEvent (a later version's).
SourceEvent = (
    AgentEvent | RuntimeEvent | GatewayEvent | ToolsEvent | VerifierEvent | ProcessEvent | ExternalEvent | JudgeEvent
)


def _tag(model: type[Event]) -> tuple[str, str | None]:
    return model.model_fields["source"].default, model.model_fields["kind"].default


def _by_tag(union, width: int) -> dict:
    out: dict = {}
    for model in get_args(union):
        tag = _tag(model)[:width]
        if tag in out:
            raise TypeError(f"events {out[tag].__name__} and {model.__name__} have one tag {tag}")
        out[tag] = model
    return out


_SOURCES: dict[str, type[Event]] = {source: m for (source,), m in _by_tag(SourceEvent, 1).items()}
_KINDS: dict[tuple[str, str], type[Event]] = _by_tag(KnownEvent, 2)
_KIND_MODELS = frozenset(_KINDS.values())

E = TypeVar("E", bound=Event)
# A run's events as its readers take them: as recorded (dicts) or already parsed.
Events = Iterable[dict | Event]


def model_for(source: object, kind: object) -> type[Event]:
    """The model of one (source, kind): its own, else its source's generic one, else Event."""
    if not isinstance(source, str):
        return Event
    if isinstance(kind, str) and (source, kind) in _KINDS:
        return _KINDS[(source, kind)]
    return _SOURCES.get(source, Event)


def parse_event(event: dict | Event) -> Event:
    """One recorded event as its model (an already parsed one is returned as it is)."""
    if isinstance(event, Event):
        return event
    if not isinstance(event, dict):
        raise TypeError(f"an event is a JSON object, not {type(event).__name__}")
    return model_for(event.get("source"), event.get("kind")).read(event)


class EventList(list[Event]):
    """A run's parsed events, in their order: what :func:`parse_events` returns (and returns
    again as it is, so every reader may parse what it is handed)."""


def parse_events(events: Events) -> EventList:
    """A run's events as models, in their order (see the module docstring)."""
    if isinstance(events, EventList):
        return events
    return EventList(parse_event(e) for e in events)


def parse_as(model: type[E], events: Events) -> list[E]:
    """Events handed over as one channel's (e.g. the tool layer's, the gateway's), each read
    as ``model`` whatever its ``source`` and ``kind`` say (a key that disagrees is kept as
    written, as any other)."""
    out = []
    for e in events:
        if isinstance(e, model):
            out.append(e)
        else:
            out.append(model.read(e.model_dump() if isinstance(e, Event) else e))
    return out


def by_source(events: Iterable[Event], source: str) -> list[Event]:
    """Every event whose ``source`` is ``source``, whatever its kind."""
    return [e for e in events if e.source == source]


def of_kind(events: Iterable[Event], model: type[E]) -> list[E]:
    """Every event of one model, in order: a kind (``ToolCall``) or a whole source
    (``VerifierEvent``: every verifier event, known kinds or not)."""
    # isinstance, without the ABC machinery (pydantic models' metaclass): readers filter a lot
    return cast(list[E], [e for e in events if model in type(e).__mro__])


def last(events: Iterable[Event], model: type[E]) -> E | None:
    """The last event of one model, or None."""
    found = of_kind(events, model)
    return found[-1] if found else None
