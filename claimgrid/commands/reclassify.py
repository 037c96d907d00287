"""``grid.py reclassify``: re-derive every classification from the stored evidence."""

from __future__ import annotations

from pathlib import Path

from claimgrid import ROOT
from claimgrid.anybytes import terminal_text
from claimgrid.classify.classifier import RunFacts, classify
from claimgrid.classify.limits import limit_hits
from claimgrid.classify.reactions import fault_facts
from claimgrid.classify.tables import table_changes, table_facts
from claimgrid.commands import validate as V
from claimgrid.commands.common import open_for_writing, read_grid_meta, signer
from claimgrid.commands.options import allow_unsealed_opt, key_opt, policies_opt
from claimgrid.inputs.tasks import load_tasks
from claimgrid.reference import registry
from claimgrid.store import RunStore
from claimgrid.store.events import parse_events
from claimgrid.store.inert import AllOrNothing, check_folder, write_file
from claimgrid.store.record import RunRecord, dump, parse_record


def change_reasons(old: dict, new: dict) -> list[str]:
    """Why a run's classification changed: one "field: old -> new (rule)" per changed field."""
    ev = new.get("evidence") or {}
    rule_of = {
        "claim_verdict": f"change evidence {ev.get('changes')} {ev.get('changes_by_tool') or {}}; "
        f"expected evidence from the task's declaration where it has one",
        "claimed": new.get("claim_rule"),
        "claim_vs_outcome": new.get("claim_rule"),
        "claim_stance": new.get("claim_rule"),
        "outcome": f"read evidence {sorted(ev.get('opened') or {})}",
        "review": f"read evidence {sorted(ev.get('opened') or {})}",
        "injection": "instruction over the tool log",
        "legitimate": "instruction over the tool log",
        "declarations": f"declared {new.get('declaration_mismatches')} against runtime and diff",
        "channels": f"tools vs gateway {new.get('channel_detail')}",
        "swap_mentioned": "trace block and echoed delegation id ignored",
    }
    out = []
    for key in new:
        if key in ("claim_rule", "declaration_mismatches", "channel_detail", "evidence"):
            continue
        if old.get(key) != new[key]:
            before = old[key] if key in old else "(not recorded)"
            out.append(f"{key}: {before} -> {new[key]}" + (f" ({rule_of[key]})" if key in rule_of else ""))
    return out


class TaskDeclarations:
    """What a record written before tasks could declare their evidence needs of its task: the
    declared ``expected_evidence`` and ``required_command``. Read from the ledger's own
    ``meta.json`` ``task_facts`` first (a published folder stands alone), else from
    ``tasks_dir`` when that folder exists (loaded only if a record needs it), else unknown."""

    def __init__(self, tasks_dir, task_facts: dict | None):
        self.tasks_dir = tasks_dir
        self.stored = task_facts or {}
        self._loaded: dict | None = None

    def get(self, task_id: str) -> tuple[str | None, str | None] | None:
        """``(expected_evidence, required_command)``, or None when neither the folder nor tasks/ has it."""
        fact = self.stored.get(task_id)
        if isinstance(fact, dict) and "expected_evidence" in fact:
            return fact.get("expected_evidence"), fact.get("evidence_command")
        if self._loaded is None:
            exists = self.tasks_dir is not None and Path(self.tasks_dir).is_dir()
            self._loaded = load_tasks(self.tasks_dir) if exists else {}
        task = self._loaded.get(task_id)
        if task is None:
            return None
        return task.spec.expectation.evidence, task.spec.expectation.evidence_command


def derive(store: RunStore, tasks_dir, task_facts: dict | None = None) -> list[tuple[dict, dict, list[str]]]:
    """Every stored run classified again from its evidence: ``(stored line, re-derived record,
    changed fields with their rules)`` per run, in line order. Reads only; the caller writes.

    A record that needs its task's declaration (:class:`TaskDeclarations`) when neither the
    ledger nor ``tasks_dir`` has it keeps its stored classification, and its reasons say which
    fields could not be recomputed and why (prefixed ``kept:``)."""
    tasks = TaskDeclarations(tasks_dir, task_facts)
    out = []
    for i, raw in enumerate(store.records(), 1):
        rec = parse_record(raw, f"{store.runs_path}:{i}")
        facts = rec.facts or RunFacts(role=rec.role or "builder")
        if "expected_evidence" not in facts.model_fields_set and "required_command" not in facts.model_fields_set:
            # A record written before tasks could declare their evidence: the task's declaration
            # applies (it is harness data about the task, not about the run).
            declared = tasks.get(rec.task)
            if declared is None:
                out.append(
                    (
                        raw,
                        raw,
                        [
                            f"kept: claim_verdict, claim_vs_outcome and the other classification fields keep their stored "
                            f"values: the record lacks expected_evidence and required_command, and task {rec.task!r} is "
                            f"neither in meta.json task_facts nor in {tasks_dir} (no such tasks folder or task)"
                        ],
                    )
                )
                continue
            facts = facts.model_copy(update={"expected_evidence": declared[0], "required_command": declared[1]})
        events = parse_events(store.load_events(rec.run_id))  # once, for both readers
        new = classify(events, facts)
        new_d = new.model_dump(mode="json")
        reasons = change_reasons(raw.get("classification") or {}, new_d)
        updated = rec.model_copy(update={"classification": new, "facts": facts}).model_dump()
        updated["faults"] = fault_facts(rec.model, events, new_d)  # derived from the same evidence
        updated["limit_hits"] = limit_hits(events) or None  # so is every limit the run hit
        out.append((raw, dump(RunRecord.model_validate(updated)), reasons))
    return out


def rederive(store: RunStore, tasks_dir) -> list[str]:
    """``--resume``'s check of the stored runs: each classification (and fault facts) derived
    again from its evidence; a line whose stored values differ is replaced by the derived
    one (sealed anew) and its run id returned. Lines that agree are kept byte for byte."""
    derived = derive(store, tasks_dir)
    changed = [
        new["run_id"]
        for raw, new, _ in derived
        if raw.get("classification") != new["classification"]
        or raw.get("faults") != new["faults"]
        or raw.get("limit_hits") != new["limit_hits"]
    ]
    if changed:
        ids = set(changed)
        store.rewrite([new if new["run_id"] in ids else raw for raw, new, _ in derived])
    return changed


def cmd_reclassify(args) -> int:
    """Re-derive every classification (and reference truth) from the stored evidence; nothing
    is re-run. Prints and writes ``reclassify.txt``: which runs changed, field by field, by rule.

    The folder's seal and manifests are verified first, and every record's evidence is
    checked readable: a failure is named (file or line) and the ledger stays as it was.
    Policy files are loaded only from ``--policies`` (each recorded one by its sha256);
    the rewritten ledger is sealed with the writer's key."""
    check_folder(args.dir)  # a FIFO or symlink at meta.json is refused before it is read
    V.check_reclassify(args.dir)
    store = RunStore(args.dir, signer(args, args.dir))
    meta_raw = store.read_meta() if store.meta_path.exists() else {}
    if store.meta_path.exists():
        meta = read_grid_meta(store)
        registry.load_recorded(meta.policy_files, meta.policies, args.policies, store.meta_path, store.folder)
    else:
        registry.load_recorded([], [], args.policies, store.folder / "meta.json", store.folder)
    open_for_writing(store, allow_unsealed=args.allow_unsealed)
    tables = table_changes(meta_raw.get("classification_tables"))
    derived = derive(store, args.tasks_dir, meta_raw.get("task_facts"))
    # A reason quotes ledger fields (a claim phrase may hold anything): lone surrogates, control and
    # bidi characters shown as visible escapes, in reclassify.txt and on the terminal.
    lines = [
        terminal_text(f"{new['run_id']}\n" + "".join(f"  {r}\n" for r in reasons))
        for _, new, reasons in derived
        if reasons
    ]
    kept = sum(1 for _, _, reasons in derived if any(r.startswith("kept:") for r in reasons))
    head = (
        "".join(f"table: {t}\n" for t in tables) or "tables: claim words, rule texts and vocabulary as the ledger's\n"
    )
    report = store.folder / "reclassify.txt"
    summary: list[str] = []
    from claimgrid.ledger import render_ledger  # polars and the renderer: only when used

    # One step: the records, the seal, reclassify.txt and the rendered files land together, or
    # (a failure midway) every file is put back as it was (claimgrid.store.inert.AllOrNothing).
    with AllOrNothing():
        if store.meta_path.exists() and store.signer is not None:
            # The classifications are now this checkout's: meta.json records the tables they were made with.
            store.write_meta({**store.read_meta(), "classification_tables": table_facts()})
        store.rewrite([new for _, new, _ in derived])
        write_file(
            report, head + f"{len(lines) - kept} of {len(derived)} runs changed, {kept} kept\n\n" + "\n".join(lines)
        )
        render_ledger(store.folder, summary)
    store.release()
    print(head, end="")
    print("".join(lines), end="")
    print(
        f"reclassified {len(derived)} runs from stored evidence; {len(lines) - kept} changed"
        + (f", {kept} kept their stored classification (a field could not be recomputed)" if kept else "")
        + f" (see {report})"
    )
    print("\n".join(summary))
    return 0


def add_parser(sub) -> None:
    """``grid.py reclassify DIR``."""
    rc = sub.add_parser("reclassify", help="re-derive every classification from stored evidence and rewrite the ledger")
    rc.add_argument("dir", type=Path)
    rc.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks")
    rc.add_argument("--conditions-dir", type=Path, default=ROOT / "conditions")
    policies_opt(rc)
    key_opt(rc)
    allow_unsealed_opt(rc)
