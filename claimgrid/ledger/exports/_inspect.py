"""A ledger as Inspect eval logs: one log per (framework, model), one sample per run.

Written with Inspect's own log API (``inspect_ai.log``; the optional ``inspect`` extra), in
its JSON log format so that the same ledger always gives the same bytes: every id and time
comes from the ledger (run ids, the runs' own start times), none from the clock or a random
source. ``inspect view --log-dir DIR`` opens the folder.

Per sample: the messages the agent's last model call carried plus the answer it got (from
the gateway's stored exchanges), the tool calls with their results, the claim verdict, the
verifier's outcome and claim-vs-outcome as scores whose explanation is the rule that fired
(:func:`claimgrid.ledger.rules.explain`), the coordinates, truth and fault facts as metadata,
and the run's evidence folder."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from claimgrid.errors import ClaimgridError
from claimgrid.ledger.exports._runs import RunView, arguments, runs, text_of
from claimgrid.ledger.load import evidence_dir, stored
from claimgrid.ledger.rules import explain
from claimgrid.store.inert import slug

# The classification fields exported as Inspect scores (the rest are metadata).
SCORES = ("claim_vs_outcome", "outcome", "claim_verdict")
COORDINATES = ("framework", "task", "content", "swap", "model", "substitute", "repeat", "role")


def _inspect():
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
        import inspect_ai.tool as tool
    except ImportError as exc:
        raise ClaimgridError(
            "export --format inspect needs Inspect: uv sync --extra inspect (or uv run --extra inspect grid.py ...)"
        ) from exc
    return log, model, scorer, tool


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()[:22]


def _messages(view: RunView, model_mod, tool_mod) -> list:
    """The conversation of the run's last model call, then that call's answer."""
    if not view.calls:
        return []
    last = view.calls[-1]
    raw = list(last.request.get("messages") or [])
    answer = ((last.response or {}).get("choices") or [{}])[0].get("message")
    if isinstance(answer, dict):
        raw.append(answer)
    out = []
    names: dict[str, str] = {}
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            continue
        mid = _id(view.run_id, "message", i)
        role = m.get("role")
        content = text_of(m.get("content"))
        if role == "system":
            out.append(model_mod.ChatMessageSystem(id=mid, content=content))
        elif role == "assistant":
            calls = []
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = (tc or {}).get("function") or {}
                call_id = str((tc or {}).get("id") or _id(view.run_id, i, j))
                names[call_id] = str(fn.get("name"))
                calls.append(
                    tool_mod.ToolCall(
                        id=call_id, function=str(fn.get("name")), arguments=arguments(fn.get("arguments"))
                    )
                )
            out.append(
                model_mod.ChatMessageAssistant(
                    id=mid, content=content, tool_calls=calls or None, model=view.record.model
                )
            )
        elif role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            out.append(
                model_mod.ChatMessageTool(id=mid, content=content, tool_call_id=call_id, function=names.get(call_id))
            )
        else:
            out.append(model_mod.ChatMessageUser(id=mid, content=content))
    return out


def _usage(view: RunView, model_mod) -> dict:
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for call in view.calls:
        usage = call.event.get("usage") or {}
        served = str(call.event.get("served_model") or view.record.model)
        total[served][0] += int(usage.get("prompt_tokens") or 0)
        total[served][1] += int(usage.get("completion_tokens") or 0)
    return {
        name: model_mod.ModelUsage(input_tokens=i, output_tokens=o, total_tokens=i + o)
        for name, (i, o) in sorted(total.items())
    }


def _scores(view: RunView, scorer_mod) -> dict:
    c = view.record.classification
    rules = {r["field"]: r for r in explain(view.record, view.events or None)}
    report = view.report() or {}
    status = (report.get("trace") or {}).get("status")
    first = next((line.strip() for line in str(report.get("text") or "").splitlines() if line.strip()), "")
    answer = str(status) if status else first[:200]  # what the agent said it did: its trace status, else its first line
    out = {}
    for key in SCORES:
        rule = rules.get(key) or {}
        out[key] = scorer_mod.Score(
            value=str(getattr(c, key)),
            answer=answer,
            explanation=str(rule.get("rule") or ""),
            metadata={"evidence_lines": rule.get("lines") or [], "truth": (view.record.truth or {}).get(key)},
        )
    return out


def _sample(view: RunView, log_mod, model_mod, scorer_mod, tool_mod):
    messages = _messages(view, model_mod, tool_mod)
    first_user = next((m for m in messages if m.role == "user"), None)
    truth = view.record.truth or {}
    metadata = {k: getattr(view.record, k) for k in COORDINATES}
    metadata.update(
        run_id=view.run_id,
        classification=stored(view.record.classification),
        truth=truth,
        faults=view.record.faults and stored(view.record.faults),
        evidence_dir=evidence_dir(view.record),
        tool_calls=[
            {"seq": t.seq, "tool": t.tool, "category": t.category, "args": t.args, "ok": t.ok, "error": t.error}
            for t in view.tools
        ],
        model_calls=len(view.calls),
    )
    report = view.report() or {}
    answer = model_mod.ChatMessageAssistant(
        id=_id(view.run_id, "output"), content=str(report.get("text") or ""), model=view.record.model
    )
    start = view.started_unix
    return log_mod.EvalSample(
        id=view.run_id,
        epoch=view.record.repeat + 1,
        uuid=_id(view.run_id, "sample"),
        input=first_user.text if first_user is not None else "",
        target=str(truth.get("claim_vs_outcome") or ""),
        messages=messages,
        output=model_mod.ModelOutput(model=view.record.model, choices=[model_mod.ChatCompletionChoice(message=answer)]),
        scores=_scores(view, scorer_mod),
        metadata=json.loads(json.dumps(metadata, default=str)),
        model_usage=_usage(view, model_mod),
        started_at=_iso(start) if start else None,
        completed_at=_iso(start + view.wall_s) if start else None,
        total_time=round(view.wall_s, 3),
    )


def export_inspect(folder: Path, out: Path, meta: dict) -> list[Path]:
    """Write ``<grid start>_<framework>__<model>.json`` Inspect eval logs into ``out``; returns their paths."""
    log_mod, model_mod, scorer_mod, tool_mod = _inspect()
    groups: dict[tuple[str, str], list[RunView]] = defaultdict(list)
    for view in runs(folder):
        groups[(view.record.framework, view.record.model)].append(view)
    grid_id = str(meta.get("grid_id") or folder.name)
    created = str(meta.get("started") or _iso(0))
    written = []
    for (framework, model), views in sorted(groups.items()):
        samples = [_sample(v, log_mod, model_mod, scorer_mod, tool_mod) for v in views]
        starts = [v.started_unix for v in views if v.started_unix]
        ends = [v.started_unix + v.wall_s for v in views if v.started_unix]
        results = log_mod.EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[
                log_mod.EvalScore(
                    name=key,
                    scorer="claimgrid",
                    metrics={
                        label: log_mod.EvalMetric(name=label, value=n / len(samples))
                        for label, n in sorted(
                            _count(str(getattr(v.record.classification, key)) for v in views).items()
                        )
                    },
                )
                for key in SCORES
            ],
        )
        eval_log = log_mod.EvalLog(
            status="success",
            eval=log_mod.EvalSpec(
                eval_id=_id(grid_id, framework, model, "eval"),
                run_id=_id(grid_id, "run"),
                created=created,
                task=f"claimgrid/{framework}",
                task_id=_id(grid_id, framework),
                dataset=log_mod.EvalDataset(name=grid_id, samples=len(samples), sample_ids=[s.id for s in samples]),
                model=f"claimgrid/{model}",
                config=log_mod.EvalConfig(),
                metadata={"grid_id": grid_id, "framework": framework, "claimgrid_commit": meta.get("claimgrid_commit")},
                packages={},
            ),
            results=results,
            stats=log_mod.EvalStats(
                started_at=_iso(min(starts)) if starts else created,
                completed_at=_iso(max(ends)) if ends else created,
                model_usage={},
            ),
            samples=samples,
        )
        # Inspect lists a JSON log only when its name starts with an ISO time (its own naming)
        # The names come from the ledger: slugs (no separator, no "..", bounded, hashed when changed).
        path = out / f"{_stamp(created)}_{slug(framework)}__{slug(model)}.json"
        log_mod.write_eval_log(eval_log, str(path), format="json")
        written.append(path)
    return written


def _stamp(created: str) -> str:
    """``2026-12-01T10:11:46+00:00`` -> ``2026-12-01T10-11-46`` (Inspect's file-name form)."""
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        when = datetime.fromtimestamp(0, UTC)
    return when.strftime("%Y-%m-%dT%H-%M-%S")


def _count(values) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for v in values:
        out[v] += 1
    return out
