"""A default grid's LEDGER.md is as long as its content (issue 54 item 4): at most
:data:`MAX_LINES` lines, the rest one link away (DETAILS.md, RUNS.md, the viewer), and its
first screen still leads with where frameworks differ.

The shape is the default grid's: the session's ``default_grid`` (every default cell, real runs
on the ``plain`` framework) widened to the default matrix's frameworks (venvs.toml), each a copy
of those runs with a few classifications changed per framework, so frameworks diverge in some
cells as real ones do. The evidence folders are shared (only the records are copied): this is a
rendering test, cheap next to a real 8-framework grid."""

from __future__ import annotations

import hashlib
import json
import shutil

from claimgrid.inputs.venvs import default_frameworks, load_venvs
from claimgrid.ledger import render_ledger

MAX_LINES = 400


def _widen(src, dst):
    names = list(default_frameworks(load_venvs()))
    dst.mkdir()
    shutil.copytree(src / "runs", dst / "runs")
    meta = json.loads((src / "meta.json").read_text())
    recs = [json.loads(line) for line in (src / "runs.jsonl").read_text().splitlines() if line.strip()]
    meta["frameworks"] = {f: next(iter(meta["frameworks"].values())) for f in names}
    meta["grid_size"] = len(recs) * len(names)
    for key in ("seal", "seal_signature"):
        meta.pop(key, None)
    (dst / "meta.json").write_text(json.dumps(meta))
    out = []
    for i, f in enumerate(names):
        for r in recs:
            r = {**json.loads(json.dumps(r)), "framework": f, "run_id": f"{r['run_id']}-{i}"}
            r.pop("seal", None)
            c = r["classification"]
            # About one run in 30 of every framework but the first reads otherwise: a divergent cell.
            if i and int(hashlib.sha256(r["run_id"].encode()).hexdigest(), 16) % 30 == 0:
                c["outcome"], c["claim_vs_outcome"] = (
                    ("EMPTY_DIFF", "HONEST_FAILURE") if c["outcome"] == "PASS" else ("PASS", "TRUE_SUCCESS")
                )
            out.append(json.dumps(r))
    (dst / "runs.jsonl").write_text("\n".join(out) + "\n")
    return names


def test_a_default_shaped_ledger_is_at_most_400_lines_with_the_rest_one_link_away(default_grid, tmp_path):
    names = _widen(default_grid, tmp_path / "wide")
    render_ledger(tmp_path / "wide")
    md = (tmp_path / "wide" / "LEDGER.md").read_text()
    details = (tmp_path / "wide" / "DETAILS.md").read_text()
    assert len(md.splitlines()) <= MAX_LINES, len(md.splitlines())
    # The first screen leads with the framework-divergence table, every framework a column.
    summary = md[md.index("## 0. Summary") : md.index("## 1. Design")]
    assert "**Where frameworks differ**" in summary
    assert "| model | " + " | ".join(names) + " |" in summary
    # Every section that left LEDGER.md is whole in DETAILS.md, linked from where it was.
    for anchor in ("divergence", "detector", "calibration"):
        assert f"(DETAILS.md#{anchor})" in md and f'<a id="{anchor}"></a>' in details
    # No row for a model under a condition it never ran.
    assert "(not run under" not in md
