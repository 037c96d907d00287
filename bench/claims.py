#!/usr/bin/env python3
"""The claim reader on labelled reports: real agents' final reports and the generated shapes.

    uv run bench/claims.py [--real tests/data/claims/real.jsonl] [--generated tests/data/claims/generated.jsonl]

Each line of a corpus file is one final report with its hand label (``yes``: a claim that the
task is done; ``no``: an honest non-claim, a stop or a failure report; ``partial``: the report
admits its results are placeholders, stubs or partial; ``unclear``: a person cannot read it one
way) and, for the real corpus, its agent, model, provenance and licence. Every report is read
by the grid's reader (:func:`claimgrid.classify.claims.text_decision`, the one ``grid.py run``
and ``grid.py check`` use) and the script prints, per corpus:

* ``no`` read as success (target <= 1%), ``yes`` read as success (target >= 95%), ``partial``
  read as success (target 0), ``UNKNOWN`` among the readable reports (not ``unclear``; target
  <= 10%);
* the confusion table (label x stance) per agent and per model;
* the reader's time per 10 kB report (the corpus's reports joined to 10 kB, read 20 times);
* the same figures on the held-out part (``"split": "held-out"``: reports whose misreadings were
  not looked at while the rules were written).

Exit status 1 when a figure misses its target. The CI floors (tests/unit/classify/
test_claim_corpus.py) read the same :func:`figures`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claimgrid.classify.claims import text_decision  # noqa: E402

REAL = ROOT / "tests" / "data" / "claims" / "real.jsonl"
GENERATED = ROOT / "tests" / "data" / "claims" / "generated.jsonl"
LABELS = ("yes", "no", "partial", "unclear")
# (figure, target, True when the figure must be at most the target)
TARGETS = {
    "no read as success": (0.01, True),
    "yes read as success": (0.95, False),
    "partial read as success": (0.0, True),
    "UNKNOWN among readable": (0.10, True),
}


def load(path: Path) -> list[dict]:
    """The labelled reports of one corpus file (one JSON object a line)."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in LABELS or not isinstance(row.get("text"), str):
            raise SystemExit(f"{path}:{n}: field label must be one of {LABELS} and text a string")
        rows.append(row)
    return rows


def read(rows: list[dict]) -> list[tuple[dict, str]]:
    """Each report with the stance the reader gives it."""
    return [(row, text_decision(row["text"]).stance) for row in rows]


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def figures(read_rows: list[tuple[dict, str]]) -> dict[str, float | None]:
    """The four target figures (None where the corpus has no report of that label)."""
    by = defaultdict(list)
    for row, stance in read_rows:
        by[row["label"]].append(stance)
    readable = [s for row, s in read_rows if row["label"] != "unclear"]
    return {
        "no read as success": _share(sum(s == "success" for s in by["no"]), len(by["no"])),
        "yes read as success": _share(sum(s == "success" for s in by["yes"]), len(by["yes"])),
        "partial read as success": _share(sum(s == "success" for s in by["partial"]), len(by["partial"])),
        "UNKNOWN among readable": _share(sum(s == "UNKNOWN" for s in readable), len(readable)),
    }


def missed(figs: dict[str, float | None]) -> list[str]:
    """The figures that miss their target."""
    out = []
    for name, value in figs.items():
        target, at_most = TARGETS[name]
        if value is not None and (value > target if at_most else value < target):
            out.append(name)
    return out


def _confusion(read_rows: list[tuple[dict, str]], key: str) -> None:
    groups: dict[str, Counter] = defaultdict(Counter)
    for row, stance in read_rows:
        groups[str(row.get(key) or "(generated)")][(row["label"], stance)] += 1
    stances = sorted({s for _, s in read_rows})
    print(f"\n  confusion per {key} (label -> stance counts)")
    for name in sorted(groups):
        c = groups[name]
        for label in LABELS:
            cells = [f"{s}={c[(label, s)]}" for s in stances if c[(label, s)]]
            if cells:
                print(f"    {name:32} {label:8} " + " ".join(cells))


def per_10kb(rows: list[dict], repeats: int = 20) -> float:
    """Milliseconds per read of a 10 kB report: the corpus's reports, longest first, one after
    the other until 10 kB (different blocks, so nothing is read twice)."""
    parts, size = [], 0
    for text in sorted((r["text"] for r in rows), key=len, reverse=True):
        if size >= 10_000:
            break
        parts.append(text)
        size += len(text) + 2
    text = "\n\n".join(parts or ["Done."])[:10_000]
    text_decision(text)  # the detector's model loads on the first read
    # CPU time of this process: on a shared machine the wall time measures the neighbours.
    start = time.process_time()
    for _ in range(repeats):
        text_decision(text)
    return (time.process_time() - start) * 1000 / repeats


def report(name: str, rows: list[dict]) -> list[str]:
    read_rows = read(rows)
    labels = Counter(r["label"] for r in rows)
    print(f"{name}: {len(rows)} reports ({', '.join(f'{k} {labels[k]}' for k in LABELS)})")
    if {"agent", "model"} <= set().union(*(r.keys() for r in rows)) if rows else False:
        print(f"  agents {len({r.get('agent') for r in rows})}, models {len({r.get('model') for r in rows})}")
    figs = figures(read_rows)
    for fig, value in figs.items():
        target, at_most = TARGETS[fig]
        shown = "n/a" if value is None else f"{value:.1%}"
        print(f"  {fig:26} {shown:>7}  (target {'<=' if at_most else '>='} {target:.0%})")
    _confusion(read_rows, "agent")
    _confusion(read_rows, "model")
    print(f"  reader CPU time per 10 kB report: {per_10kb(rows):.2f} ms (target <= 5 ms)")
    wrong = [(r, s) for r, s in read_rows if r["label"] != "unclear" and (s == "success") != (r["label"] == "yes")]
    for r, s in wrong:
        print(f"  misread {r['id']}: label {r['label']}, read {s}")
    return missed(figs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real", type=Path, default=REAL)
    ap.add_argument("--generated", type=Path, default=GENERATED)
    args = ap.parse_args()
    bad, recorded = [], {}
    for name, path in (("real corpus", args.real), ("generated set", args.generated)):
        if not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
        rows = load(path)
        bad += [f"{name}: {m}" for m in report(name, rows)]
        if name == "real corpus" and path == REAL:
            shown = {f: "n/a" if v is None else f"{v:.1%}" for f, v in figures(read(rows)).items()}
            recorded = {f"real corpus ({len(rows)} reports): {f}": v for f, v in shown.items()}
            recorded["reader CPU per 10 kB report"] = f"{per_10kb(rows):.2f} ms"
        held = [r for r in rows if r.get("split") == "held-out"]
        if held:
            # Reports no rule was written against (their models' misreadings were not looked at).
            print(f"  held-out part ({len(held)} reports):")
            for fig, value in figures(read(held)).items():
                print(f"    {fig:26} {'n/a' if value is None else f'{value:.1%}':>7}")
        print()
    for line in bad:
        print(f"MISSED {line}")
    if recorded:
        from _figures import record  # bench/, the script's own folder

        record("claims.py", recorded)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
