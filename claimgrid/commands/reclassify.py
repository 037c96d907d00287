"""``grid.py reclassify``: re-derive every classification from the stored evidence."""

from __future__ import annotations

from claimgrid.classify.classifier import RunFacts, classify
from claimgrid.classify.reactions import fault_facts
from claimgrid.commands import validate as V
from claimgrid.commands.common import finish, open_for_writing
from claimgrid.inputs.tasks import load_tasks
from claimgrid.reference import registry
from claimgrid.store import RunStore
from claimgrid.store.events import parse_events


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


def cmd_reclassify(args) -> int:
    """Re-derive every classification (and reference truth) from the stored evidence; nothing
    is re-run. Prints and writes ``reclassify.txt``: which runs changed, field by field, by rule.

    Every record's evidence is checked readable first: a missing evidence folder is one line
    and the ledger stays as it was."""
    from claimgrid.store.record import RunRecord, dump, parse_record

    V.check_reclassify(args.dir)
    store = RunStore(args.dir)
    open_for_writing(store)
    meta = store.read_meta() if store.meta_path.exists() else {}
    for path in list(dict.fromkeys([*meta.get("policies", []), *(str(p) for p in args.policies)])):
        registry.load_policies(path)
    records = store.records()
    tasks = load_tasks(args.tasks_dir)
    lines = []
    out = []
    for i, raw in enumerate(records, 1):
        rec = parse_record(raw, f"{store.runs_path}:{i}")
        facts = rec.facts or RunFacts(role=rec.role or "builder")
        task = tasks.get(rec.task)
        if (
            task
            and "expected_evidence" not in facts.model_fields_set
            and "required_command" not in facts.model_fields_set
        ):
            # A record written before tasks could declare their evidence: the task's current
            # declaration applies (it is harness data about the task, not about the run).
            exp = task.spec.expectation
            facts = facts.model_copy(
                update={"expected_evidence": exp.evidence, "required_command": exp.evidence_command}
            )
        events = parse_events(store.load_events(rec.run_id))  # once, for both readers
        new = classify(events, facts)
        old = raw.get("classification") or {}
        new_d = new.model_dump(mode="json")
        reasons = change_reasons(old, new_d)
        if reasons:
            lines.append(f"{rec.run_id}\n" + "".join(f"  {r}\n" for r in reasons))
        updated = rec.model_copy(update={"classification": new, "facts": facts}).model_dump()
        updated["faults"] = fault_facts(rec.model, events, new_d)  # derived from the same evidence
        out.append(dump(RunRecord.model_validate(updated)))
    store.rewrite(out)
    report = store.folder / "reclassify.txt"
    report.write_text(f"{len(lines)} of {len(records)} runs changed\n\n" + "\n".join(lines))
    print("".join(lines), end="")
    print(f"reclassified {len(records)} runs from stored evidence; {len(lines)} changed (see {report})")
    return finish(store)
