"""``grid.py compare A B``: two ledgers, cell by cell (before/after a framework pin, a change of
adapter, two checkouts of the harness).

Both folders' seals and manifests are verified first (:func:`claimgrid.commands.common.verify_ledger`);
a failure is bad input, named by file or line. Nothing in either folder is executed or
imported, and neither is written.

Cells are matched by their coordinates (framework, task, content, swap, model, substitute,
repeat). For each cell in both, every field of :data:`RESULT_FIELDS` (each classification
key on its own, the reference truth, the fault facts, the evidence limits) is compared, and
the run's parity facts; a cell present in one ledger only is listed as such. The grid facts
of :data:`META_FACTS` that differ between the two ``meta.json`` are listed too: they say what
was changed, not what changed in the results.

Output: the terminal, and ``compare.md`` + ``compare.json`` in ``--out`` (default
``compare-<A>-vs-<B>`` next to B), with both runs' evidence folders for every changed cell.
Exit status: 0 when every cell is in both and its results are identical (grid facts may
differ: they are listed), 1 when any cell changed or is in one ledger only, 2 for bad input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from claimgrid.anybytes import markdown_text, safe_text, terminal_text
from claimgrid.commands.common import verify_ledger
from claimgrid.commands.options import allow_unsealed_opt
from claimgrid.commands.validate import UsageError
from claimgrid.errors import ClaimgridError
from claimgrid.store import RUNS_NAME, LedgerFolder, RunStore
from claimgrid.store.inert import check_folder, output_folder, outside_ledgers, write_file
from claimgrid.store.record import dump
from claimgrid.store.seal import SealReport

COORDINATES = ("framework", "task", "content", "swap", "model", "substitute", "repeat")
# Record members compared besides the classification (whose keys are compared one by one).
RESULT_FIELDS = ("truth", "faults", "limits")
# The meta.json facts that define what ran (not when, how fast or by which command): the
# framework versions, the hashes of locks, tasks, conditions and policies, the harness
# checkout and interpreter, the limits, the sandbox, the treatments and the stored task facts.
META_FACTS = (
    "frameworks",
    "hashes",
    "policy_files",
    "claimgrid_commit",
    "python",
    "platform",
    "substitute",
    "timeout_s",
    "max_model_calls",
    "isolation",
    "guard",
    "verify_cache",
    "swap_conditions",
    "task_facts",
    "content_facts",
    "task_provenance",
    "budget",
    "provider_retry",
)


def _open(folder: Path, side: str, allow_unsealed: bool) -> tuple[RunStore, dict, list[dict], SealReport]:
    check_folder(folder)  # a FIFO or symlink at meta.json is refused before it is read
    if not folder.is_dir():
        raise UsageError(f"compare {side} {folder}: not a ledger folder (no such directory)")
    store, ledger = RunStore(folder), LedgerFolder(folder)
    if not ledger.has_meta() or not ledger.has_runs():
        raise UsageError(f"compare {side} {folder}: not a ledger folder (no meta.json or {RUNS_NAME})")
    report = verify_ledger(store, allow_unsealed=allow_unsealed)
    meta = ledger.meta()  # the store's bounded parser
    # Typed by the store's reader (the last line of a run id wins), compared as the record writes them.
    runs = ledger.runs()
    for rec in runs:
        missing = [k for k in COORDINATES if k not in rec.model_fields_set]
        if missing:
            raise ClaimgridError(f"{store.runs_path}: run {rec.run_id!r}: field '{missing[0]}' is missing")
    records = [dump(r) for r in runs]
    return store, meta, records, report


def _cell(rec: dict) -> tuple:
    return tuple(rec.get(k) for k in COORDINATES)


def _cell_name(cell: tuple) -> str:
    return " ".join(f"{k}={v}" for k, v in zip(COORDINATES, cell))


def _fields(rec: dict) -> dict:
    """The compared values of one record: classification keys, then :data:`RESULT_FIELDS`."""
    out = {f"classification.{k}": v for k, v in (rec.get("classification") or {}).items()}
    for key in RESULT_FIELDS:
        out[key] = rec.get(key)
    return out


def _diff(a: dict, b: dict) -> list[dict]:
    return [{"field": k, "a": a.get(k), "b": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def compare(a: Path, b: Path, allow_unsealed: bool = False) -> dict:
    """The comparison of ledgers ``a`` and ``b`` as a JSON-able dict (see the module doc)."""
    sa, meta_a, recs_a, seal_a = _open(Path(a), "A", allow_unsealed)
    sb, meta_b, recs_b, seal_b = _open(Path(b), "B", allow_unsealed)
    by_a = {_cell(r): r for r in recs_a}
    by_b = {_cell(r): r for r in recs_b}
    changed, same = [], 0
    for cell in sorted(set(by_a) & set(by_b), key=str):
        ra, rb = by_a[cell], by_b[cell]
        fields = _diff(_fields(ra), _fields(rb))
        parity = _diff(ra.get("parity") or {}, rb.get("parity") or {})
        if not fields and not parity:
            same += 1
            continue
        changed.append(
            {
                "cell": dict(zip(COORDINATES, cell)),
                "fields": fields,
                "parity": parity,
                "evidence": {
                    "a": str(sa.folder.resolve() / str(ra.get("evidence_dir") or f"runs/{ra['run_id']}")),
                    "b": str(sb.folder.resolve() / str(rb.get("evidence_dir") or f"runs/{rb['run_id']}")),
                },
            }
        )
    only = {
        side: [dict(zip(COORDINATES, c)) for c in sorted(set(mine) - set(theirs), key=str)]
        for side, mine, theirs in (("a", by_a, by_b), ("b", by_b, by_a))
    }
    facts = [{"fact": k, "a": meta_a.get(k), "b": meta_b.get(k)} for k in META_FACTS if meta_a.get(k) != meta_b.get(k)]
    # The classification tables by their sha256 only (the entries are in each meta.json).
    tables = [{k: v.get("sha256") for k, v in (m.get("classification_tables") or {}).items()} for m in (meta_a, meta_b)]
    if tables[0] != tables[1]:
        facts.append({"fact": "classification_tables", "a": tables[0], "b": tables[1]})
    seals = {side: {"sealed": r.sealed, "fingerprint": r.fingerprint} for side, r in (("a", seal_a), ("b", seal_b))}
    if seals["a"] != seals["b"]:
        facts.append({"fact": "seal", "a": seals["a"], "b": seals["b"]})
    return {
        "a": str(sa.folder),
        "b": str(sb.folder),
        "cells_in_both": len(set(by_a) & set(by_b)),
        "identical_cells": same,
        # A cell whose results are equal but whose run parity differs is listed, never counted as changed.
        "changed": [c for c in changed if c["fields"]],
        "parity_only": [c for c in changed if not c["fields"]],
        "only_in_a": only["a"],
        "only_in_b": only["b"],
        "grid_facts": facts,
        "seals": seals,
    }


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def lines(result: dict) -> list[str]:
    """The terminal's (and compare.md's) account of a comparison, one fact per line."""
    out = [
        f"compare A {result['a']} with B {result['b']}: {result['cells_in_both']} cells in both, "
        f"{result['identical_cells']} identical, {len(result['changed'])} changed, "
        f"{len(result['only_in_a'])} only in A, {len(result['only_in_b'])} only in B"
    ]
    for c in result["changed"]:
        out.append(f"changed: {_cell_name(tuple(c['cell'].values()))}")
        out += [f"  {d['field']}: {_short(d['a'])} -> {_short(d['b'])}" for d in c["fields"]]
        out += [f"  parity {d['field']}: {_short(d['a'])} -> {_short(d['b'])}" for d in c["parity"]]
        out.append(f"  evidence: A {c['evidence']['a']}  B {c['evidence']['b']}")
    for c in result["parity_only"]:
        out.append(f"same results, other parity: {_cell_name(tuple(c['cell'].values()))}")
        out += [f"  parity {d['field']}: {_short(d['a'])} -> {_short(d['b'])}" for d in c["parity"]]
    for side in ("a", "b"):
        for c in result[f"only_in_{side}"]:
            out.append(f"only in {side.upper()}: {_cell_name(tuple(c.values()))}")
    for f in result["grid_facts"]:
        out.append(f"grid fact {f['fact']}: {_short(f['a'])} -> {_short(f['b'])}")
    return out


def _markdown(result: dict, out: Path) -> str:
    def link(path: str) -> str:
        return f"[{Path(path).name}]({os.path.relpath(path, out)})"

    md = ["# Comparison of two ledgers", "", f"- A: `{result['a']}`", f"- B: `{result['b']}`"]
    for side in ("a", "b"):
        s = result["seals"][side]
        md.append(f"- seal of {side.upper()}: " + (f"ed25519, key `{s['fingerprint']}`" if s["sealed"] else "none"))
    md += ["", lines(result)[0], ""]
    if result["changed"]:
        md += ["## Changed cells", ""]
        for c in result["changed"]:
            md += [f"### {_cell_name(tuple(c['cell'].values()))}", "", "| field | A | B |", "|---|---|---|"]
            for d in [*c["fields"], *({**p, "field": "parity " + p["field"]} for p in c["parity"])]:
                a, b = (_short(d[k]).replace("|", "\\|") for k in ("a", "b"))
                md.append(f"| {d['field']} | {a} | {b} |")
            md += ["", f"Evidence: A {link(c['evidence']['a'])}, B {link(c['evidence']['b'])}", ""]
    for title, key in (("Same results, other parity", "parity_only"),):
        if result[key]:
            md += [f"## {title}", ""] + [f"- {_cell_name(tuple(c['cell'].values()))}" for c in result[key]] + [""]
    for side in ("a", "b"):
        if result[f"only_in_{side}"]:
            md += [f"## Cells only in {side.upper()}", ""]
            md += [f"- {_cell_name(tuple(c.values()))}" for c in result[f"only_in_{side}"]] + [""]
    if result["grid_facts"]:
        md += ["## Grid facts that differ (meta.json)", "", "| fact | A | B |", "|---|---|---|"]
        for f in result["grid_facts"]:
            a, b = (_short(f[k]).replace("|", "\\|") for k in ("a", "b"))
            md.append(f"| {f['fact']} | {a} | {b} |")
        md.append("")
    # ledger fields' HTML, control and bidi characters shown as text (claimgrid.anybytes)
    return markdown_text("\n".join(md) + "\n")


def _shown(value):
    """``value`` with every string's lone surrogates as visible \\udXXX text: what compare prints
    and writes (the ledgers keep the originals), so no field fails to encode."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


def cmd_compare(args) -> int:
    """Compare ledgers ``args.a`` and ``args.b``; print, write compare.md and compare.json; 0/1/2."""
    result = _shown(compare(args.a, args.b, args.allow_unsealed))
    out = Path(args.out) if args.out else Path(args.b).resolve().parent / f"compare-{args.a.name}-vs-{args.b.name}"
    outside_ledgers(out, "--out", args.a, args.b)
    text = lines(result)
    try:
        output_folder(out)  # a real folder; each file through a new temporary, never a planted symlink
        write_file(out / "compare.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        write_file(out / "compare.md", _markdown(result, out.resolve()))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot be written ({exc.strerror or exc})") from None
    print(terminal_text("\n".join(text)))  # ledger fields: no escape sequence reaches the terminal
    print(f"compare: {out / 'compare.md'}")
    return 1 if result["changed"] or result["only_in_a"] or result["only_in_b"] else 0


def add_parser(sub) -> None:
    """``grid.py compare A B``."""
    cp = sub.add_parser(
        "compare",
        help="compare two ledgers cell by cell (seals verified first); exit 0 identical, 1 different, 2 bad input",
    )
    cp.add_argument("a", type=Path, metavar="A", help="a ledger folder (before)")
    cp.add_argument("b", type=Path, metavar="B", help="a ledger folder (after)")
    cp.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for compare.md and compare.json (default: compare-<A>-vs-<B> next to B)",
    )
    allow_unsealed_opt(cp)
