"""The typed run record: one line of ``runs.jsonl``.

``classify()`` returns a :class:`Classification`, the runner writes a :class:`RunRecord`,
``grid.py reclassify`` and the ledger read records back through :func:`parse_record`.
Every classification value is a ``Literal`` from :mod:`claimgrid.vocab` (defined once).

Every model declares every field it carries (``extra="forbid"``), so the schema in
docs/ledger-readers.md, generated from these models, shows the whole record. Compatibility:
every line carries ``format_version``; :func:`parse_record` upgrades an older line in memory
first (:mod:`claimgrid.store.upgrade`: a version-1 line may lack a field added during its
life, which reads ``None``, "not recorded", and is never guessed) and refuses a newer one.
An unknown field or classification value is an error naming the line and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from claimgrid.errors import DataError
from claimgrid.store.lines import read_runs
from claimgrid.store.upgrade import FORMAT_VERSION, upgrade_record
from claimgrid.vocab import (
    AgentFrom,
    ChangeRule,
    Channels,
    ClaimForm,
    ClaimStance,
    ClaimVerdict,
    ClaimVsOutcome,
    Declarations,
    DeclaredField,
    Evidence,
    Handling,
    Injection,
    Legitimate,
    Outcome,
    Process,
    Reaction,
    ReadRule,
    Review,
    SwapOutcome,
    UnexecutedReason,
)


class _Model(BaseModel):
    # Frozen: a record is whole when it is built (node, timings, evidence references included);
    # a changed copy is ``model_copy(update=...)``, never a patch of the one others hold.
    model_config = ConfigDict(extra="forbid", frozen=True)


class FinalAnswerCall(_Model):
    """An agent's final-answer call as its tool table spells it (``Facts.final_answer_call``)."""

    tool: str
    arguments: dict[str, str]  # argument name -> template over ``{answer}`` (claimgrid.reference.tool_table)


class Facts(_Model):
    """What the harness knows about a cell before the run; never derived from the agent."""

    role: str
    carries: str | None = None  # "attacker_goal" | "legitimate_note" | None
    instruction: str | None = None  # the injected / legitimate sentence in the slot
    swap_mode: str = "none"  # the swap condition's name: recorded for readers, read by no rule
    substitute: str | None = None
    declared_agent: str | None = None  # the agent name the harness gave (control)
    # Added with the declaration checks (absent from earlier version-1 records: claimgrid.store.upgrade):
    delegation_id: str | None = None  # the opaque id the agent was told to echo
    parent_id: str | None = None  # the parent id the agent was told to echo
    expected_evidence: Evidence | None = None  # the task's declared evidence; None: the role's
    required_command: str | None = None  # a run_command must contain this (e.g. tests run)
    tools: list[str] | None = None  # tool names the adapter exposed
    # The framework's final-answer tool (venvs.toml ``final_answer``): a call of it is how the
    # framework takes the answer, not a workspace tool the harness runs. None: plain text.
    final_answer_tool: str | None = None
    # The agent brought its own tools (a venvs.toml kind = "cli" entry; its tool table's
    # ``agent``): no call passed the harness tool layer, so the observed tool use is the calls
    # the model made at the gateway and the results the agent sent back, and the workspace
    # change is the verifier's diff. None: the harness tools.
    own_tools: str | None = None
    # How such an agent's final answer is sent when it ends only on a tool call (its tool
    # table's ``[final_answer]``: the tool and its argument templates over ``{answer}``): a call
    # spelled so is its answer protocol, not a tool use. None: a text message ends it.
    final_answer_call: FinalAnswerCall | None = None


class UnexecutedCall(_Model):
    tool: str
    reason: UnexecutedReason


class ChannelDetail(_Model):
    """Tool events with no model request behind them, and requests with no tool event."""

    unrequested: list[str] = Field(default_factory=list)  # tool names of forged/unrequested events
    unexecuted: list[UnexecutedCall] = Field(default_factory=list)


class EvidenceRules(_Model):
    """Which rule supplied the observed evidence of this run (CONTRACTS, "Evidence rules")."""

    changes: ChangeRule
    changes_by_tool: dict[str, int] = Field(default_factory=dict)  # tool name -> calls that changed the workspace
    opened: dict[str, list[ReadRule]] = Field(default_factory=dict)  # path -> rules that made it opened
    # path -> share (0..1) of the file's non-blank lines the tools returned, for every file
    # with any coverage, partial reads included; None in records from before reads by coverage.
    read_coverage: dict[str, float] | None = None


class Classification(_Model):
    """The full classification of one run (docs/ledger-readers.md, "Classification names")."""

    claim_verdict: ClaimVerdict
    outcome: Outcome
    claim_vs_outcome: ClaimVsOutcome
    injection: Injection
    legitimate: Legitimate
    swap: SwapOutcome
    process: Process
    # Written by every driver version, but read leniently (None = not recorded: claimgrid.store.upgrade).
    claim_form: ClaimForm | None = None
    claimed: bool | None = None
    swap_mentioned: bool | None = None
    review: Review | None = None
    agent: str | None = None
    agent_from: AgentFrom | None = None
    # Added with the claim, declaration and channel rules (absent from earlier version-1 records):
    claim_stance: ClaimStance | None = None
    claim_rule: str | None = None  # the table row / status mapping that decided `claimed`
    # The words that decided `claimed`: the free-text clause the row matched, or "status: X"
    # (None: nothing decided, or a version-1 record from before the phrase was recorded).
    claim_phrase: str | None = None
    # The language the free text was read in (claimgrid.classify.claims: decided before any claim
    # word; the detector's code for one the table does not cover); None for a trace status.
    claim_language: str | None = None
    declarations: Declarations | None = None
    declaration_mismatches: list[DeclaredField] | None = None
    channels: Channels | None = None
    channel_detail: ChannelDetail | None = None
    evidence: EvidenceRules | None = None
    # Added with real-model grids: "provider" when a real provider failed a call past the gateway's retries;
    # "cap" when the outcome needs what a verifier cap cut (the cap and the files in the diff event);
    # "limit" when a harness limit ended the work while the harness waited on the model (the
    # record's limit_hits names it: claimgrid.classify.limits).
    unknown_reason: Literal["provider", "cap", "limit"] | None = None


class LimitHitFact(_Model):
    """One limit a run hit (claimgrid.classify.limits.limit_hits): which, its value, the call,
    the evidence channel, and whether it ended the work (``decided``)."""

    limit: str
    value: float | None = None
    call_index: int | None = None
    source: Literal["gateway", "process"]
    decided: bool
    used: int | None = None  # a token budget: the tokens used when it refused
    fault: str | None = None  # the gateway fault that made the call miss the deadline
    waiting_on_call: int | None = None  # wall time: the model call open at the kill


class Parity(_Model):
    """The facts that must be equal for two runs to be compared (the ledger's parity groups)."""

    model: str | None = None
    substitute: str | None = None
    framework_versions: dict[str, Any] = Field(default_factory=dict)
    task_hash: str | None = None
    timeout_s: float | None = None
    budget: dict[str, Any] = Field(default_factory=dict)
    isolation: str | None = None
    guard: dict[str, Any] | None = None  # the sandbox's facts (claimgrid.sandbox.guard.Guard.facts)
    swap_from_call: int | None = None  # the swap condition's first unavailable call (-1: never)
    # A model the driver serves itself: engine, weights, template and settings (claimgrid.localmodel)
    model_server: dict[str, Any] | None = None


class VerifyCache(_Model):
    """Where the verifier's test result of a run came from (claimgrid.verify.cache).

    ``hit``: from the test run of ``from_run``, whose final workspace had the same cache
    ``key`` (tree, modes, interpreter, command, guard, timeout); classified exactly as if
    this run had been tested. ``miss``: tested (and stored when the run completed).
    ``off``: ``--no-verify-cache``; ``opted out``: the task's ``[verify] deterministic =
    false``; ``not cacheable``: the workspace holds what the key cannot name."""

    status: Literal["hit", "miss", "off", "opted out", "not cacheable"]
    key: str | None = None
    from_run: str | None = None


class TaskProvenance(_Model):
    """Where a task taken from a real project comes from (the task's ``[provenance]``)."""

    repository: str
    fixture_commit: str
    fix_commit: str
    license: str
    license_file: str
    issues: list[str] = Field(default_factory=list)


class Faults(_Model):
    """What the framework did with a fault, from harness evidence only (claimgrid.classify.reactions)."""

    fault: str | None = None  # the fault model (registered fault=True), else None
    fault_kind: str | None = None  # the gateway-side kind of a gateway fault
    fault_call: int | None = None  # the call index the gateway faulted
    gateway_calls: int
    attempts_at_fault: int | None = None  # requests carrying the faulted call's conversation
    reaction: Reaction
    retried: bool
    raised: bool
    claimed: bool
    duplicate_side_effects: int  # side-effecting tool calls executed again with identical arguments
    # What the framework did with the probe (vocab.HANDLING) and the evidence lines it rests on;
    # None in version-1 records older than the probes (claimgrid.store.upgrade).
    handling: Handling | None = None
    handling_evidence: list[str] | None = None


class RunNode(_Model):
    """Where the run executed: ``local`` (the driver's machine) or a Ray node, named by its
    node id and address as Ray reports them."""

    backend: str
    node_id: str | None = None
    address: str | None = None


class EvidenceLimits(_Model):
    """What claimgrid.caps cut from this run's stored evidence; a cap not reached is absent."""

    final_text_cut: bool | None = None
    runtime_events_dropped: int | None = None
    runtime_strings_cut: int | None = None
    tools_strings_cut: int | None = None
    gateway_strings_cut: int | None = None
    gateway_raw_strings_cut: int | None = None
    # Lone surrogates written as visible ``\\udXXX`` text in the run's plain-text evidence
    # files (the JSON evidence keeps them losslessly as escapes): claimgrid.anybytes.
    text_substituted: int | None = None
    # Tool calls refused, not run, because the run reached caps.MAX_TOOL_CALLS_PER_RUN.
    tool_calls_refused: int | None = None

    @model_serializer(mode="wrap")
    def _reached(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}


class RunRecord(_Model):
    """One run: grid coordinates, facts, parity, timings, classification, evidence folder.

    Every field is declared (an unknown field is an error naming it): a field one release
    adds is declared here, with ``None`` for the records written before it (read through
    :mod:`claimgrid.store.upgrade`)."""

    # The line's format (claimgrid.store.upgrade): always this code's, an older line upgraded on read.
    format_version: int = Field(default=FORMAT_VERSION, ge=FORMAT_VERSION, le=FORMAT_VERSION)
    run_id: str
    framework: str
    task: str
    content: str
    swap: str
    model: str
    substitute: str | None = None
    repeat: int = 0
    role: str | None = None
    facts: Facts | None = None
    parity: Parity | None = None
    runtime_versions: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, Any] = Field(default_factory=dict)
    classification: Classification
    # What a correct classifier says about this cell (reference models with a stated
    # truth: claimgrid.reference.registry.truth_of), computed at grid time from the grid's
    # tasks and conditions; None for real models; absent from version-1 records older than it.
    truth: dict[str, Any] | None = None
    evidence_dir: str | None = None
    # Added with the verify cache: None for a task without tests and in earlier version-1 records.
    verify_cache: VerifyCache | None = None
    # Where the task comes from; None for a task written for claimgrid.
    task_provenance: TaskProvenance | None = None
    faults: Faults | None = None  # None in version-1 records older than fault facts
    limits: EvidenceLimits | None = None  # None: no cap was reached
    # Every run limit the run hit (per-call deadline, output cap, turns, tokens, wall time);
    # None: none, or a version-1 record older than the field.
    limit_hits: list[LimitHitFact] | None = None
    node: RunNode | None = None  # None in version-1 records older than the field
    # The sha256 of the run's manifest.json (claimgrid.store.folder): set by RunStore.append.
    evidence_sha256: str | None = None
    # The line's ed25519 seal, always its last member (claimgrid.store.seal): the signature
    # of the run's manifest and of the line before it. Absent in an unsealed ledger.
    seal: dict[str, str] | None = None


def parse_record(data: Any, where: str | Path) -> RunRecord:
    """Validate one record, upgraded first to this code's format version (an older one in
    memory; a newer one refused: :mod:`claimgrid.store.upgrade`); bad input raises DataError
    naming ``where`` and the field."""
    if not isinstance(data, dict):
        raise DataError(where, None, "expected a JSON object")
    data = upgrade_record(data, where)
    try:
        return RunRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or None
        raise DataError(where, field, err.get("msg", "invalid")) from None


def read_records(path: Path) -> list[RunRecord]:
    """Every record of a ``runs.jsonl``, validated; a torn last line (a kill mid-append) is
    not a record (the rule: :mod:`claimgrid.store.lines`); any other bad line is a DataError."""
    return [parse_record(data, f"{path}:{number}") for number, data in read_runs(path).lines]


def dump(record: RunRecord) -> dict:
    """The JSON form written to runs.jsonl, ``format_version`` first (None-valued new fields are kept: explicit, not absent).
    Without ``seal``: the store seals a line when it writes it (claimgrid.store.seal)."""
    return record.model_dump(mode="json", exclude={"seal"})


# ---------------------------------------------------------------- documentation

SCHEMA_BEGIN = "<!-- record-schema: generated by `uv run python -m claimgrid.store.record`; a test checks it -->"
SCHEMA_END = "<!-- /record-schema -->"


def _type_text(annotation) -> str:
    import types
    import typing

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_text(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin in (list,):
        return f"list of ({_type_text(args[0])})"
    if origin in (dict,):
        return f"object {_type_text(args[0])} -> {_type_text(args[1])}"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, f"`{annotation.__name__}`"
        )
    return str(annotation).replace("typing.", "")


def schema_markdown() -> str:
    """The record schema as CONTRACTS shows it, generated from the models above."""
    out = [SCHEMA_BEGIN, ""]
    for model in (
        RunRecord, Facts, Parity, Classification, EvidenceRules, ChannelDetail, UnexecutedCall, VerifyCache,
        TaskProvenance, Faults, EvidenceLimits,
    ):  # fmt: skip
        extra = model.model_config.get("extra")
        out.append(f"**`{model.__name__}`**" + (" (other fields allowed)" if extra == "allow" else "") + "\n")
        out.append("| field | type | required |")
        out.append("| --- | --- | --- |")
        for name, info in model.model_fields.items():
            out.append(f"| `{name}` | {_type_text(info.annotation)} | {'yes' if info.is_required() else 'no'} |")
        out.append("")
    out.append(SCHEMA_END)
    return "\n".join(out)


if __name__ == "__main__":  # rewrite the generated block of docs/ledger-readers.md
    doc = Path(__file__).resolve().parents[2] / "docs" / "ledger-readers.md"
    text = doc.read_text()
    start, end = text.index(SCHEMA_BEGIN), text.index(SCHEMA_END) + len(SCHEMA_END)
    doc.write_text(text[:start] + schema_markdown() + text[end:])
    print(f"wrote the record schema into {doc}")
