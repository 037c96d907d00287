"""``grid.py audit DIR``: a folder of runs made elsewhere, checked as a grid's and written as a sealed ledger.

DIR holds runs other harnesses made: a Harbor job (trial folders), a folder of transcripts
with or without the verdicts another harness recorded, an Inspect log directory. Each run is
found by content (:func:`find_runs`): a file or folder :func:`claimgrid.classify.transcripts.read_transcript`
reads is a run (a file holding several runs, an Inspect log's samples or an OTLP file's traces,
is one run each; a Harbor trial folder is one run with its own ``result.json``); a verdict file
:func:`claimgrid.classify.outcomes.read_outcome` reads gives its verdict to its run
(:func:`_pair`: a SWE-bench report to the run its instance id names, any other to the one run
of its folder); an Inspect log's samples carry their own scores. Every other file that is not
plainly documentation or a log (:data:`NOT_RUNS`) is a run the audit cannot read: recorded,
``UNKNOWN``, with the reader's reason, never a stop.

Each run is classified exactly as ``grid.py check`` classifies one
(:func:`claimgrid.commands.check.check_verdict`: the grid's classifier on the report as the
``agent`` event, the transcript's events, a clean exit when the transcript records none, the
outcome another harness recorded), and stored as a grid run is: its evidence folder
(``events.jsonl``, the exact events the classification was made from, so ``reclassify``
derives the same again; ``audit.json``, where it came from and what stayed unknown, why) and
its sealed line, in a ledger folder that ``report``, ``reclassify``, ``compare`` and
``export`` read like a grid's. A run's coordinates: ``framework`` the agent (as the
transcript names it, else its form), ``model`` the model the transcript names (else
``unknown``), ``task`` the run's name in DIR, ``content`` and ``swap`` the conditions it ran
under as far as the audit knows them (:data:`CONTENT`, :data:`SWAP`: not a treatment).

Bad input: DIR not a folder, or a folder with no run any reader can read, is one line,
exit 2, nothing written. Exit 0 otherwise (the findings are in the ledger).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from claimgrid import ROOT, caps
from claimgrid.classify import judge
from claimgrid.classify.classifier import classify
from claimgrid.classify.limits import limit_hits
from claimgrid.classify.outcomes import ExternalOutcome, read_outcome
from claimgrid.classify.reactions import fault_facts
from claimgrid.classify.tables import table_facts
from claimgrid.classify.transcripts import Transcript, read_transcript
from claimgrid.commands.check import check_events, check_facts, final_report
from claimgrid.commands.common import commit, finish, now, signer
from claimgrid.commands.options import claim_judge_opt, key_opt
from claimgrid.commands.validate import UsageError
from claimgrid.errors import ClaimgridError, DataError, StorageError
from claimgrid.execute.engine import _Progress
from claimgrid.store import EVENTS_NAME, RunStore
from claimgrid.store.record import RunRecord
from claimgrid.vocab import ROLE_EVIDENCE

# The conditions an audited run is recorded under: the audit did not set them, so it states
# none (the ledger's tables never pool them with a grid's treatments).
CONTENT = "as-run"
SWAP = "as-run"
UNKNOWN_MODEL = "unknown"
AUDIT_FILE = "audit.json"
# Files that are a folder's documentation, logs or code, not runs (told apart by name only to
# leave them out of the unreadable count: a transcript is still recognised by content).
NOT_RUNS = (
    ".md", ".txt", ".log", ".py", ".toml", ".yaml", ".yml", ".patch", ".diff", ".sh", ".cfg", ".ini",
    ".csv", ".html", ".png", ".svg", ".jpg", ".lock",
)  # fmt: skip
UNREADABLE = "unreadable"
NO_RESULT = "no verdict recorded beside the transcript: nothing to verify the claim against"


@dataclass
class Found:
    """One run found in DIR: where (``path``, relative ``name``), which run of a file holding
    several (``select``), the verdict file beside it (``result``), or why it cannot be read."""

    path: Path
    name: str
    select: str | None = None
    result: Path | None = None
    unreadable: str | None = None
    transcript: Transcript | None = field(default=None, repr=False)
    result_select: str | None = None  # the instance of a verdict file naming several


def _several(path: Path) -> tuple[bool, list[str]] | None:
    """The runs of a file holding several, and whether they carry their own scores: an Inspect
    log's sample ids (True), an OTLP file's trace ids (False); None when it holds one or is no
    such file. Never raises: the reader names the fault."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if raw[:2] == b"PK":
        try:
            with zipfile.ZipFile(path) as z:
                ids = []
                for n in sorted(z.namelist()):
                    if n.startswith("samples/") and n.endswith(".json"):
                        sample = json.loads(z.read(n))
                        ids.append(str(sample.get("id")) if isinstance(sample, dict) else n)
                return (True, ids) if len(ids) > 1 else None
        except (zipfile.BadZipFile, ValueError, KeyError, OSError):
            return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, dict) and isinstance(doc.get("eval"), dict) and isinstance(doc.get("samples"), list):
        ids = [str(s.get("id")) for s in doc["samples"] if isinstance(s, dict)]
        return (True, ids) if len(ids) > 1 else None
    if isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list):
        traces = {
            str(s.get("traceId"))
            for rs in doc["resourceSpans"] or []
            for ss in (rs or {}).get("scopeSpans") or []
            for s in (ss or {}).get("spans") or []
            if isinstance(s, dict)
        }
        return (False, sorted(traces)) if len(traces) > 1 else None
    return None


def _reads(path: Path, top: Path | None = None) -> tuple[Transcript | None, str | None]:
    try:
        return read_transcript(path), None
    except DataError as exc:
        return None, _why(exc, path, top)
    except (OSError, ValueError, RecursionError) as exc:  # a reader's fault on odd bytes: the run's, not the audit's
        return None, f"{path.name}: not readable ({type(exc).__name__}: {exc})"


def _why(exc: Exception, path: Path, top: Path | None = None) -> str:
    """A reader's one line with the path as the run's name in DIR: no path of this machine is
    written into the ledger."""
    text = " ".join(str(exc).split())
    try:
        name = str(path.relative_to(top)) if top is not None else path.name
    except ValueError:
        name = path.name
    return text.replace(str(path), name)


@dataclass
class Verdict:
    """A verdict file found in DIR: its path, and the instance ids it names (a SWE-bench report's
    keys; empty when it names none: a Harbor result, a CTRF or JUnit report)."""

    path: Path
    instances: tuple[str, ...] = ()


def _verdict(path: Path) -> Verdict | None:
    """``path`` as a recorded verdict (:func:`claimgrid.classify.outcomes.read_outcome`), or None."""
    try:
        read_outcome(path)
    except DataError as exc:
        if getattr(exc, "field", None) != "--run" and "--run" not in str(exc):
            return None
    except (OSError, ValueError, RecursionError):
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return Verdict(path)
    if isinstance(doc, dict) and "resolved" not in doc:
        keys = tuple(k for k, v in doc.items() if isinstance(v, dict) and "resolved" in v)
        return Verdict(path, keys)
    return Verdict(path)


def run_stem(found: Found) -> str:
    """The instance id a run's name carries: a folder's name, a file's name up to its first dot
    (``django__django-16255.traj.json``), a selected sample's id."""
    if found.select is not None:
        return found.select
    return found.path.name if found.path.is_dir() else found.path.name.split(".", 1)[0]


def find_runs(top: Path) -> tuple[list[Found], int]:
    """Every run under ``top`` (module doc), in path order; and the count of files left out
    as documentation or logs (:data:`NOT_RUNS`) or as hidden. A folder a reader reads whole
    (a Harbor trial) is one run and is not walked into."""
    found: list[Found] = []
    verdicts: list[Verdict] = []
    skipped = 0
    seen = 0
    for here, dirs, files in os.walk(top):
        dirs.sort()
        here_p = Path(here)
        keep = []
        for d in dirs:
            sub = here_p / d
            if d.startswith(".") or sub.is_symlink():
                continue  # the audit reads DIR, never where a link points
            transcript, _ = _reads(sub)
            if transcript is not None:
                found.append(Found(sub, str(sub.relative_to(top)), transcript=transcript))
            else:
                keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            path = here_p / f
            seen += 1
            if seen > caps.MAX_AUDIT_FILES:
                raise UsageError(
                    f"audit {top}: more than {caps.MAX_AUDIT_FILES:,} files (claimgrid caps.MAX_AUDIT_FILES); "
                    "audit a smaller folder"
                )
            if f.startswith(".") or path.is_symlink() or not path.is_file():
                skipped += 1
                continue
            name = str(path.relative_to(top))
            several = _several(path)
            if several:
                scored, ids = several
                for sel in ids:
                    found.append(Found(path, f"{name}#{sel}", select=sel, result=path if scored else None))
                continue
            transcript, why = _reads(path, top)
            if transcript is not None:
                inspect = transcript.form == "inspect log"  # its samples carry their scores
                found.append(Found(path, name, transcript=transcript, result=path if inspect else None))
                continue
            verdict = _verdict(path)
            if verdict is not None:
                verdicts.append(verdict)
            elif path.suffix.lower() in NOT_RUNS:
                skipped += 1
            else:
                found.append(Found(path, name, unreadable=why))
    _pair(found, verdicts, top)
    return found, skipped


def _pair(found: list[Found], verdicts: list[Verdict], top: Path) -> None:
    """Each verdict file to its run, never guessing: a report naming instance ids to the run
    whose name carries that id (``result_select`` the id); else the run in its folder whose
    name's stem is the verdict file's (``django__django-16255.report.json`` to
    ``django__django-16255.traj.json``); else, when it is the one verdict of a folder holding no
    run, the run whose stem is that folder's name (SWE-bench's ``<instance id>/report.json``);
    else, when its folder holds one verdict file, the one
    run of that folder (or, when the folder holds none, of the nearest folder above that holds
    runs). A verdict that fits no run or several pairs none."""
    readable = [f for f in found if f.unreadable is None and f.result is None]
    by_stem: dict[str, list[Found]] = {}
    by_dir: dict[Path, list[Found]] = {}
    for f in readable:
        by_stem.setdefault(run_stem(f), []).append(f)
        by_dir.setdefault(f.path if f.path.is_dir() else f.path.parent, []).append(f)
    per_dir = Counter(v.path.parent for v in verdicts)

    def give(runs: list[Found], v: Verdict, key: str | None = None) -> bool:
        if len(runs) == 1 and runs[0].result is None:
            runs[0].result, runs[0].result_select = v.path, key
            return True
        return False

    for v in verdicts:
        if v.instances:
            for key in v.instances:
                give(by_stem.get(key, []), v, key)
            continue
        stem = v.path.name.split(".", 1)[0]
        if give([f for f in by_dir.get(v.path.parent, []) if run_stem(f) == stem], v):
            continue
        if (
            per_dir[v.path.parent] == 1
            and not by_dir.get(v.path.parent)
            and give(by_stem.get(v.path.parent.name, []), v)
        ):
            continue  # the SWE-bench harness's layout: <instance id>/report.json beside no run
        if per_dir[v.path.parent] != 1:
            continue
        here = v.path.parent
        while True:
            runs = by_dir.get(here, [])
            if runs or here == top or top not in here.parents:
                break
            here = here.parent
        give(runs, v)


# ---------------------------------------------------------------- one run


def _slug(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{s[: caps.RUN_ID_MAX_BYTES - 20]}-{digest}"


def _names(transcript: Transcript | None) -> tuple[str, str]:
    """(agent, model) as the transcript names them: the agent program its reader names, else
    the runtime's attribution, else its form; the first model its answers carried, else the
    gateway's served model, else :data:`UNKNOWN_MODEL`."""
    if transcript is None:
        return UNREADABLE, UNKNOWN_MODEL
    agent = transcript.agent
    model = transcript.models[0] if transcript.models else None
    for e in transcript.events:
        agent = agent or (e.get("agent") if e.get("source") == "runtime" else None)
        model = (
            model or e.get("served_model") or (e.get("model") if e.get("source") in ("gateway", "runtime") else None)
        )
    return str(agent or transcript.form), str(model or UNKNOWN_MODEL)


def audit_run(f: Found, top: Path, role: str, claim_judge: str | None = None) -> tuple[RunRecord, dict]:
    """One run classified as ``check`` classifies it: its record and its evidence files;
    ``claim_judge``: the model whose reading of the report is added as its ``judge`` event."""
    transcript = f.transcript
    if transcript is None and f.unreadable is None:
        try:
            transcript = read_transcript(f.path, f.select)
        except DataError as exc:
            f.unreadable = _why(exc, f.path, top)
    text = final_report(transcript) if transcript is not None else ""
    external: ExternalOutcome | None = getattr(transcript, "outcome", None)  # a Harbor trial's own result.json
    result_why = None
    if external is None and f.result is not None and f.unreadable is None:
        try:
            external = read_outcome(f.result, f.result_select or f.select)
        except (DataError, OSError, ValueError) as exc:
            result_why = _why(exc, f.result, top)
    if external is not None:
        # the verdict file by its name in DIR: the ledger holds no path of this machine
        where = Path(external.path)
        external = dataclasses.replace(
            external, path=str(where.relative_to(top)) if where.is_relative_to(top) else where.name
        )
    facts = check_facts(role, None, None, None)
    if f.unreadable is None:
        events, unknown = check_events(text, transcript, None, external)
        if claim_judge is not None:
            events.append(judge.reading_event(claim_judge, text))  # a second reader: the classifier reads none
        if external is None:
            unknown["outcome"] = unknown["claim_vs_outcome"] = result_why or NO_RESULT
    else:
        events, unknown = [], {}  # nothing was read: no report, so the classifier says its claim is unknown
    classification = classify(events, facts).model_dump(mode="json")
    if f.unreadable is not None:
        unknown = {
            k: f"the run cannot be read: {f.unreadable}" for k in ("claim_verdict", "outcome", "claim_vs_outcome")
        }
    agent, model = _names(transcript)
    run_id = _slug(f.name)
    source = {
        "name": f.name,
        "select": f.select,
        "result": str(f.result.relative_to(top)) if f.result is not None else None,
        "outcome_from": (
            {k: v for k, v in external.to_json().items() if k != "path"} if external is not None else None
        ),
        "form": transcript.form if transcript is not None else None,
        "unreadable": f.unreadable,
        "unknown": {k: v for k, v in unknown.items() if classification.get(k) == "UNKNOWN"},
        "sha256": _sha(f.path),
    }
    record = RunRecord.model_validate(
        {
            "run_id": run_id,
            "framework": agent,
            "task": f.name,
            "content": CONTENT,
            "swap": SWAP,
            "model": model,
            "role": role,
            "facts": facts,
            "classification": classification,
            # derived from the same evidence as reclassify derives them (claimgrid.commands.reclassify.derive)
            "faults": fault_facts(model, events, classification),
            "limit_hits": limit_hits(events) or None,
            "evidence_dir": f"runs/{run_id}",
        }
    )
    files = {
        EVENTS_NAME: events,
        AUDIT_FILE: source,
        "transcript.json": {"final_text": text, "runtime_events": [], "error": f.unreadable},
    }
    return record, files


def _sha(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


# ---------------------------------------------------------------- the command


def cmd_audit(args) -> int:
    top: Path = args.dir
    if not top.is_dir():
        raise UsageError(f"audit {top}: not a folder")
    if args.claim_judge:
        judge.check_judge(args.claim_judge)  # one line before the ledger folder is made
    role = args.role
    found, skipped = find_runs(top)
    readable = [f for f in found if f.unreadable is None]
    if not readable:
        why = f"; first unreadable: {found[0].name}: {found[0].unreadable}" if found else ""
        raise UsageError(f"audit {top}: no run any reader can read ({len(found)} file(s) tried{why}); nothing written")
    out = args.out or ROOT / "ledger" / f"audit-{time.strftime('%Y-%m-%dT%H-%M-%SZ', time.gmtime())}-{top.name}"
    if out.exists():
        raise UsageError(f"--out {out}: already exists; an audit writes a new ledger folder")
    store = RunStore(out, signer(args, out))
    ids = [_slug(f.name) for f in found]
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    if dupes:
        raise ClaimgridError(f"audit {top}: two runs share the run id {dupes[0]!r}")
    # DIR by its name alone: the ledger holds no path of the publisher's machine.
    command = (
        f"uv run grid.py audit {top.name}"
        + (f" --role {role}" if role != "builder" else "")
        + (f" --claim-judge {args.claim_judge}" if args.claim_judge else "")
    )
    meta = {
        "grid_id": out.name,
        "command": command,
        "started": now(),
        "finished": None,
        "claimgrid_commit": commit(),
        "models": [],
        "tasks": [],
        "content": [CONTENT],
        "swap": [SWAP],
        "repeats": 1,
        "grid_size": len(found),
        "plan": ids,
        "reference_models": False,
        "classification_tables": table_facts(),
        "audit": {"source": top.name, "runs_found": len(found), "files_left_out": skipped, "role": role},
    }
    try:
        store.create(meta, command=command)
    except OSError as exc:
        raise StorageError(f"--out {out}: cannot create the ledger folder ({exc.strerror or exc})") from None
    print(
        f"audit {top}\n  {len(found)} runs found ({len(found) - len(readable)} unreadable, recorded as UNKNOWN), "
        f"{skipped} files left out (documentation, logs, hidden)\n  ledger {out}",
        flush=True,
    )
    progress = _Progress(len(found), enabled=not args.no_progress)
    counts: Counter = Counter()
    false = 0
    agents, models = set(), set()
    try:
        for f in found:
            record, files = audit_run(f, top, role, args.claim_judge)
            store.write_evidence(record.run_id, files)
            store.append(record)
            c = record.classification
            counts[c.outcome] += 1
            false += c.claim_vs_outcome == "FALSE_SUCCESS"
            agents.add(record.framework)
            models.add(record.model)
            progress.advance(counts, false)
    finally:
        progress.close()
    meta.update(finished=now(), models=sorted(models), frameworks={a: {} for a in sorted(agents)})
    store.write_meta(meta)
    store.release()
    return finish(store)


def add_parser(sub) -> None:
    ap = sub.add_parser("audit", help="check a folder of runs made elsewhere and write them as a sealed ledger")
    ap.add_argument(
        "dir", type=Path, help="the folder of runs: a Harbor job, transcripts with or without verdicts, Inspect logs"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="the new ledger folder (default: ledger/audit-<time>-<DIR name>)"
    )
    ap.add_argument(
        "--role",
        default="builder",
        choices=sorted(ROLE_EVIDENCE),
        help="the runs' role, which sets the evidence a claim needs (default: builder)",
    )
    ap.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    claim_judge_opt(ap)
    key_opt(ap)
