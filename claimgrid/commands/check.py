"""``grid.py check``: the claim check on a real agent's run, as a stop hook.

Inputs: the agent's final report (``--final FILE``: text, with or without the structured
trace block), its transcript when there is one (``--transcript FILE``: OpenAI-style chat
messages, an OTLP/JSON GenAI trace, an Inspect eval log or a claimgrid ``events.jsonl``,
told apart by content, :mod:`claimgrid.classify.transcripts`; ``--run ID`` picks one run of
a file holding several), and the repository with its expectation (``--repo REPO
--expectation FILE``, verified as ``grid.py verify`` does, with the transcript's tool calls
and answers as the tool layer's and gateway's record, which a review's outcome needs). The
same classifier as a grid run (:func:`claimgrid.classify.classifier.classify`) reads
evidence built the grid's way: the report as the ``agent`` event, each transcript tool
call as a ``tools`` event (its category from the harness tool names, else from the tool's
name), the verifier's events. ``--agent``, ``--delegation-id`` and ``--parent-id`` are
what the runtime told the agent (the declarations are checked against them). The verdict (claim verdict, claim vs outcome, identity, declaration
mismatches, the evidence rules) is printed and appended as one line to ``--log FILE``
(JSONL); ``grid.py check --report LOG`` summarises a log.

What is missing is never guessed: without a transcript the claim verdict is ``UNKNOWN``
(no tool evidence), without a repository the outcome is ``UNKNOWN``; each with its reason
in ``unknown``.

Exit status: 1 when a success claim is not backed (``FALSE_SUCCESS``, or a claim verdict
other than ``consistent`` on a success claim), 0 otherwise, 2 for bad input.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from claimgrid.classify import judge
from claimgrid.classify.classifier import claim_vs_outcome, classify
from claimgrid.classify.outcomes import ExternalOutcome, read_outcome
from claimgrid.classify.transcripts import Transcript, read_transcript
from claimgrid.commands.options import claim_judge_opt
from claimgrid.commands.verify_repo import BadInput, Gate
from claimgrid.errors import DataError
from claimgrid.store.lines import scan_events
from claimgrid.store.record import Facts
from claimgrid.trace import parse_trace
from claimgrid.vocab import EXTERNAL_SOURCE, ROLE_EVIDENCE

FIELDS = (
    "claim_verdict",
    "claim_form",
    "claim_stance",
    "claim_rule",
    "claim_phrase",
    "outcome",
    "claim_vs_outcome",
    "agent",
    "agent_from",
    "declarations",
    "declaration_mismatches",
)
# The agents whose stop-hook protocol `check --hook` speaks (claimgrid.commands.stop_hook).
HOOK_PROTOCOLS = ("claude-code", "codex", "gemini")
NO_TRANSCRIPT = "no transcript: the tool calls the claim is checked against are unknown"
NO_REPOSITORY = "no repository: nothing to verify the claim against"
TRUNCATED = "transcript_truncated"


def check_events(
    text: str,
    transcript: Transcript | None,
    verification: dict | None,
    external: ExternalOutcome | None = None,
) -> tuple[list[dict], dict[str, str]]:
    """(events, unknown): the evidence one check classifies, built the grid's way (the report
    as the ``agent`` event, the transcript's events, a clean exit when the transcript records
    none, a torn transcript's ``transcript_truncated``, the verifier's events, else the verdict
    another harness recorded as the ``external`` ``outcome`` event), and what it cannot know
    without a transcript or repository. ``grid.py audit`` stores exactly these events, so
    ``reclassify`` derives the same again."""
    trace, trace_error = parse_trace(text)
    events: list[dict] = [
        {"source": "agent", "kind": "report", "text": text, "trace": trace, "trace_error": trace_error}
    ]
    unknown: dict[str, str] = {}
    if transcript is not None:
        events += transcript.events
        if not transcript.has_process:
            # the transcript is the run's record: what it holds is all the agent did
            events.append({"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok"})
        if transcript.truncated:
            events.append({"source": "process", "kind": TRUNCATED, "reason": transcript.truncated_reason})
            unknown["claim_verdict"] = f"{TRUNCATED}: {transcript.truncated_reason}"
    else:
        unknown["claim_verdict"] = NO_TRANSCRIPT
    if verification is not None:
        events += verification["events"]
    elif external is not None:
        # the repository wins where both exist: a recorded verdict only where none was verified
        events.append({"kind": "outcome", **external.to_json()})
        if external.outcome == "UNKNOWN":
            unknown["outcome"] = unknown["claim_vs_outcome"] = f"{EXTERNAL_SOURCE} ({external.form}): {external.why}"
    else:
        unknown["outcome"] = unknown["claim_vs_outcome"] = NO_REPOSITORY
    return events, unknown


def check_verdict(
    text: str,
    transcript: Transcript | None,
    verification: dict | None,
    facts: Facts,
    external: ExternalOutcome | None = None,
) -> tuple[dict, dict[str, str]]:
    """(verdict, unknown) of one check, without starting anything: ``text`` is the agent's
    final report, ``transcript`` its transcript read as events (None: none), ``verification``
    the report of :meth:`claimgrid.commands.verify_repo.Gate.report` on the repository
    (None: none). The classifier is the grid's (:func:`classify`) on the evidence of
    :func:`check_events`; a transcript without a ``process`` event is the whole run (a clean exit).

    ``external``: a verdict another harness recorded (``--outcome-from``), the outcome where
    there is no repository to verify (source ``external``; the repository wins where both
    exist). A truncated transcript (``transcript_truncated``) cannot show the calls after its
    tear: a claim verdict that says the claim is not backed becomes ``UNKNOWN`` with that
    reason (what is missing might back it), a backed one stands (the classifier's rules)."""
    events, unknown = check_events(text, transcript, verification, external)
    c = classify(events, facts).model_dump()
    verdict = {k: c.get(k) for k in FIELDS}
    verdict["evidence"] = c.get("evidence")
    if verification is not None and verification.get("unknown") and verdict["outcome"] != "UNKNOWN":
        # what the verifier could not know without the transcript (a review's files and verdict)
        verdict["outcome"] = "UNKNOWN"
        verdict["claim_vs_outcome"] = claim_vs_outcome(bool(c.get("claimed")), "UNKNOWN")
        unknown["outcome"] = unknown["claim_vs_outcome"] = verification["unknown"]
    for name in list(unknown):
        if verdict.get(name) != "UNKNOWN":
            unknown.pop(name)
    return verdict, unknown


def check_facts(
    role: str,
    agent: str | None,
    delegation_id: str | None,
    parent_id: str | None,
    expected: str | None = None,
    required: str | None = None,
) -> Facts:
    """What the runtime knows of the run (never the agent's word): its role, the agent name
    and ids it gave, the expectation's declared evidence (else the role's) and command."""
    return Facts(
        role=role,
        declared_agent=agent,
        delegation_id=delegation_id,
        parent_id=parent_id,
        expected_evidence=expected or ROLE_EVIDENCE[role],
        required_command=required,
    )


def final_report(transcript: Transcript) -> str:
    """A transcript's last report: the reader's (``transcript.final_report``, e.g. a Claude Code
    ``result`` line) when it gives one, else the last model answer without a tool call, else
    nothing (what ``grid.py audit`` and a stop hook check when no report is given)."""
    if isinstance(transcript.final_report, str):
        return transcript.final_report
    for e in reversed(transcript.events):
        if e.get("source") == "gateway" and isinstance(e.get("content"), str):
            return e["content"]
    return ""


def recorded_final(path: Path | None, transcript: Transcript | None) -> str:
    """The agent's final report as its transcript holds it, for ``check`` without ``--final``: a
    native transcript's ``final_report`` (Claude Code's ``result`` line, the last answer), or a
    claimgrid ``events.jsonl``'s last ``agent`` ``report`` event (a published ledger's run)."""
    if transcript is not None and transcript.form != "claimgrid events":
        if transcript.final_report:
            return transcript.final_report  # the report the agent's own transcript ends on
        why = transcript.truncated_reason or "no answer of the agent in it"
        raise BadInput(f"--transcript {path}: no final report ({why}); give --final FILE")
    if path is None or transcript is None or transcript.form != "claimgrid events":
        raise BadInput(
            "check needs --final FILE (the agent's final report), or a claimgrid events.jsonl "
            "--transcript that holds it, or --report LOG"
        )
    text = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the transcript reader already accepted the file; a torn last line is not an event
        if isinstance(event, dict) and event.get("source") == "agent" and event.get("kind") == "report":
            text = event.get("text")
    if not isinstance(text, str):
        raise BadInput(f"--transcript {path}: no agent report event (text) to check; give --final FILE")
    return text


def verify_against(
    repo: Path, expectation: Path, transcript: Transcript | None, base=None, python=None, ignore=()
) -> tuple[dict, str | None, str | None]:
    """The repository verified as ``grid.py verify`` does, with the transcript's tool calls and
    answers as the tool layer's and gateway's record: (the verifier's report, the expectation's
    declared evidence, its evidence command)."""
    with Gate(repo, expectation, base, python, "auto", list(ignore)) as gate:
        tools = [e for e in transcript.events if e.get("source") == "tools"] if transcript else None
        exchanges = (
            [e for e in transcript.events if e.get("source") == "gateway" and e.get("kind", "exchange") == "exchange"]
            if transcript
            else ()
        )
        verification = gate.report(gate.events(tools, exchanges), transcript=transcript is not None)
        exp = gate.task.spec.expectation
        return verification, exp.evidence, exp.evidence_command


def run_check(args) -> dict:
    """The verdict of one check (what is printed and logged)."""
    if args.claim_judge:
        judge.check_judge(args.claim_judge)
    if args.final is not None and not args.final.is_file():
        raise BadInput(f"--final {args.final}: no such file")
    if (args.repo is None) != (args.expectation is None):
        raise BadInput("--repo and --expectation go together")
    if args.run is not None and args.transcript is None and args.outcome_from is None:
        raise BadInput("--run names a run of a --transcript or --outcome-from file")
    transcript = None
    if args.transcript is not None:
        if not args.transcript.exists():
            raise BadInput(f"--transcript {args.transcript}: no such file or trial folder")
        transcript = read_transcript(args.transcript, args.run)
    if args.final is not None:
        text = args.final.read_text(encoding="utf-8", errors="replace")
    else:
        text = recorded_final(args.transcript, transcript)
    external = None
    if args.outcome_from is not None:
        if not args.outcome_from.exists():
            raise BadInput(f"--outcome-from {args.outcome_from}: no such file")
        external = read_outcome(args.outcome_from, args.run)
    elif transcript is not None and transcript.outcome is not None:
        external = transcript.outcome  # a Harbor trial folder's own result.json
    verification = None
    expected = required = None
    if args.repo is not None:
        verification, expected, required = verify_against(
            args.repo, args.expectation, transcript, args.base, args.python, args.ignore or []
        )
    facts = check_facts(args.role, args.agent, args.delegation_id, args.parent_id, expected, required)
    verdict, unknown = check_verdict(text, transcript, verification, facts, external)
    return {
        **({"claim_judge": judge_reading(args.claim_judge, text, verdict)} if args.claim_judge else {}),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "final": str(args.final) if args.final is not None else f"{args.transcript} (its agent report event)",
        "transcript": str(args.transcript) if args.transcript else None,
        "transcript_form": transcript.form if transcript else None,
        "transcript_agent": transcript.agent if transcript else None,
        "transcript_models": transcript.models if transcript else None,
        TRUNCATED: transcript.truncated_reason if transcript else None,
        "subagents": {k: {"name": v.name, "tool_calls": len(v.events)} for k, v in transcript.subagents.items()}
        if transcript
        else None,
        "outcome_from": (EXTERNAL_SOURCE if verification is None else "verifier")
        if external
        else ("verifier" if verification is not None else None),
        "external_outcome": external.to_json() if external else None,
        "repository": str(args.repo) if args.repo else None,
        "verdict": verdict,
        "unknown": unknown,
    }


def judge_reading(model: str, text: str, verdict: dict) -> dict:
    """The claim judge's reading of ``text`` (its ``judge`` event) and whether it agrees with the
    deterministic reader's ``claim_stance`` in ``verdict``, which stays the classification."""
    event = judge.reading_event(model, text)
    return event | {
        "reader": judge.reader_label(verdict.get("claim_stance")),
        "agrees": judge.agrees(verdict.get("claim_stance"), event.get("stance")),
    }


def judge_line(j: dict) -> str:
    """One line for a judge reading: its stance and sentence, or why it gave none."""
    head = f"claim judge ({j['model']}, {j['prompt_version']}; no authority): "
    if j.get("stance") is None:
        return head + f"no reading: {j.get('error')}"
    said = f"{j['stance']} by {j.get('sentence')!r}"
    return head + said + ("; agrees with the reader" if j["agrees"] else f"; the reader says {j['reader']}")


# Claim verdicts that say the structured claim is not what the transcript shows.
UNBACKED = (
    "narration only",
    "self-report contradicts the transcript",
    "read-only imposture",
    "claimed work without a diff",
    "over-claimed evidence",
)


def backed(verdict: dict) -> bool:
    """False for a success claim the evidence contradicts (what exits 1)."""
    return verdict.get("claim_vs_outcome") != "FALSE_SUCCESS" and verdict.get("claim_verdict") not in UNBACKED


def summarise(log: Path) -> list[str]:
    """The report of a verdict log: checks, claims backed, counts by claim vs outcome and verdict."""
    if not log.is_file():
        raise DataError(log, None, "no such verdict log")
    rows = []
    found = scan_events(log)  # the store's bounded reader: every line, the last included, must be whole
    if found.bad:
        number, why = found.bad[0]
        raise DataError(f"{log}:{number}", None, f"not a verdict line of grid.py check: {why}")
    unchecked = 0
    for n, row in found.lines:
        if row.get("hook") and "verdict" not in row:
            unchecked += 1  # a stop hook's line for a stop it let through unchecked (stop_hook_active)
            continue
        if not isinstance(row.get("verdict"), dict):
            raise DataError(f"{log}:{n}", "verdict", "not a verdict line of grid.py check")
        rows.append(row["verdict"])
    out = [f"{len(rows)} check(s); {sum(1 for r in rows if not backed(r))} claim(s) not backed"]
    if unchecked:
        out[0] += f"; {unchecked} stop(s) let through unchecked (the agent already continued once for a stop hook)"
    for field in ("claim_vs_outcome", "claim_verdict"):
        counts = Counter(str(r.get(field)) for r in rows)
        out.append(f"{field}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return out


def cmd_check(args) -> int:
    if args.report is not None:
        for line in summarise(args.report):
            print(line)
        return 0
    if args.final is None and args.transcript is None:
        raise BadInput("check needs --final FILE (the agent's final report), or --report LOG")
    result = run_check(args)
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        with open(args.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(result, default=str) + "\n")
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        v = result["verdict"]
        for k in FIELDS:
            print(f"{k}: {v[k]}")
        for k, why in result["unknown"].items():
            print(f"{k} UNKNOWN: {why}")
        if result[TRUNCATED]:
            print(f"{TRUNCATED}: {result[TRUNCATED]}")
        if result["external_outcome"]:
            x = result["external_outcome"]
            used = "used" if result["outcome_from"] == EXTERNAL_SOURCE else "the repository's verifier wins"
            print(f"external outcome ({x['form']}, {used}): {x['outcome']}: {x['why']}")
        if result.get("claim_judge"):
            print(judge_line(result["claim_judge"]))
    return 0 if backed(result["verdict"]) else 1


def add_parser(sub) -> None:
    cp = sub.add_parser(
        "check", help="check an agent's final report against its transcript and repository (a stop hook)"
    )
    cp.add_argument(
        "--final",
        type=Path,
        help="the agent's final report (text, with or without the trace block); default with a claimgrid "
        "events.jsonl --transcript: the report it recorded",
    )
    cp.add_argument(
        "--transcript",
        type=Path,
        help="the run's transcript (told apart by content): OpenAI-style messages, an OTLP/JSON GenAI trace, an "
        "Inspect eval log, a claimgrid events.jsonl, Claude Code stream-json or session JSONL, Codex exec --json "
        "or rollout, Gemini CLI JSON/stream-json/session, an ATIF trajectory or Harbor trial folder, SWE-agent, "
        "mini-swe-agent or OpenHands trajectories",
    )
    cp.add_argument(
        "--outcome-from",
        type=Path,
        metavar="FILE",
        help="a verdict another harness recorded (Harbor result.json, SWE-bench report.json, CTRF JSON, JUnit "
        "XML, Inspect log score; told apart by content): the outcome where there is no --repo",
    )
    cp.add_argument("--run", default=None, help="which run of a transcript file holding several (trace or sample id)")
    cp.add_argument("--repo", type=Path, help="the repository the agent changed (with --expectation)")
    cp.add_argument("--expectation", type=Path, help="a TOML file with an [expectation] table")
    cp.add_argument("--base", default=None, help="the commit to diff against (as grid.py verify)")
    cp.add_argument("--python", default=None, help="the interpreter {python} names in test_command")
    cp.add_argument("--role", default="builder", choices=sorted(ROLE_EVIDENCE), help="the agent's role")
    cp.add_argument("--agent", default=None, help="the agent's name as your runtime knows it")
    cp.add_argument("--delegation-id", default=None, help="the task id your runtime gave the agent to echo")
    cp.add_argument("--parent-id", default=None, help="the parent id your runtime gave the agent to echo")
    cp.add_argument("--ignore", action="append", metavar="GLOB", help="as grid.py verify --ignore")
    cp.add_argument("--log", type=Path, help="append the verdict as one JSON line to this file")
    cp.add_argument("--report", type=Path, metavar="LOG", help="summarise a verdict log instead")
    cp.add_argument("--json", action="store_true", help="print the verdict as JSON")
    claim_judge_opt(cp)
    cp.add_argument(
        "--hook",
        choices=HOOK_PROTOCOLS,
        default=None,
        help="run as the agent's stop hook: read its hook input on stdin and answer in its protocol "
        "(claimgrid.commands.stop_hook); with --log, --expectation (default: the repository's "
        ".claimgrid/expectation.toml when it has one)",
    )
