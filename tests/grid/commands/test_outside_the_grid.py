"""``grid.py verify`` and ``grid.py check`` on every run of the default grid give the grid's
own classification: each run's final workspace is rebuilt as a team's repository (the
task's fixture committed, the run's stored patch applied on top), verified through the
same :class:`claimgrid.commands.verify_repo.Gate` the commands use, and checked with the
run's stored report and events; every run is compared field by field with its record.

Runs with the same stored patch on the same task share one rebuilt repository and one
:class:`claimgrid.verify.cache.VerifyCache` (a tree is tested once); a review task's runs
are verified with each run's own transcript (what the review outcome reads)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from claimgrid.classify.classifier import claim_vs_outcome, classify_outcome
from claimgrid.classify.transcripts import read_transcript
from claimgrid.commands.check import FIELDS, NO_TRANSCRIPT, check_facts, check_verdict
from claimgrid.commands.cli import main
from claimgrid.commands.verify_repo import Gate
from claimgrid.inputs.tasks import GIT_ENV, load_tasks
from claimgrid.store.lines import read_events, read_runs
from claimgrid.verify.cache import VerifyCache

from tests.export_support import need


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


class Rebuilt:
    """The final workspaces of a ledger's runs as repositories outside the project, one per
    distinct (task, stored patch), each with its open :class:`Gate`."""

    def __init__(self, root: Path):
        self.root, self.tasks = root, load_tasks()
        self.bases: dict[str, Path] = {}
        self.gates: dict[tuple[str, str], tuple[Path, Gate]] = {}

    def base(self, task: str) -> Path:
        if task not in self.bases:  # the task's fixture as a team's repository: its own history
            repo = self.root / "bases" / task
            shutil.copytree(self.tasks[task].repo, repo, symlinks=True)
            _git(repo, "init", "-q", "-b", "main")
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
            self.bases[task] = repo
        return self.bases[task]

    def gate(self, task: str, patch: bytes) -> tuple[Path, Gate]:
        key = (task, hashlib.sha256(patch).hexdigest())
        if key not in self.gates:
            repo = self.root / task / key[1][:16]
            shutil.copytree(self.base(task), repo, symlinks=True)
            if patch.strip():
                (self.root / "change.patch").write_bytes(patch)
                _git(repo, "apply", "--binary", "--whitespace=nowarn", str(self.root / "change.patch"))
            exp = self.tasks[task].folder / "task.toml"
            self.gates[key] = repo, Gate(repo, exp, None, self.tasks[task].python, "auto")
        return self.gates[key]

    def close(self) -> None:
        for _, gate in self.gates.values():
            gate.close()


def compare_ledger(folder: Path, scratch: Path) -> dict:
    """Every run of the ledger in ``folder`` verified and checked outside the grid; returns
    the counts and the disagreements (run, field, grid's value, outside value)."""
    runs = read_runs(folder / "runs.jsonl").values
    rebuilt, cache = Rebuilt(scratch), VerifyCache()
    verified: dict[tuple, dict] = {}
    plain: dict[tuple, dict] = {}
    disagree: list[tuple] = []
    samples: dict[str, dict] = {}
    try:
        for rec in runs:
            evidence = folder / rec["evidence_dir"]
            patch = (evidence / "diff.patch").read_bytes()
            repo, gate = rebuilt.gate(rec["task"], patch)
            transcript = read_transcript(evidence / "events.jsonl")
            tools = [e for e in transcript.events if e["source"] == "tools"]
            exchanges = [e for e in transcript.events if e["source"] == "gateway"]
            group = (rec["task"], hashlib.sha256(patch).hexdigest())
            if group not in plain:  # grid.py verify: the repository alone
                plain[group] = gate.report(gate.events(None, (), cache), transcript=False)
            # what the verifier reads of a transcript: nothing unless the expectation has a review
            heard = json.dumps([tools, exchanges], sort_keys=True, default=str) if gate.review else ""
            key = (*group, hashlib.sha256(heard.encode()).hexdigest())
            if key not in verified:
                verified[key] = gate.report(gate.events(tools, exchanges, cache), transcript=True)
            report = _report_text(evidence)
            facts = rec["facts"]
            exp = gate.task.spec.expectation
            cf = check_facts(
                facts["role"],
                facts.get("declared_agent"),
                facts.get("delegation_id"),
                facts.get("parent_id"),
                exp.evidence,
                exp.evidence_command,
            )
            got, _ = check_verdict(report, transcript, verified[key], cf)
            want = _outside_truth(rec["classification"], evidence)
            for name in FIELDS:
                if got[name] != want[name]:
                    disagree.append((rec["run_id"], name, want[name], got[name]))
            # grid.py verify: the grid's outcome, or UNKNOWN with the reason where a review decides it
            outside = plain[group]
            if outside["outcome"] != want["outcome"] and not (
                gate.review and outside["unknown"] and outside["outcome"] == "UNKNOWN"
            ):
                disagree.append((rec["run_id"], "verify outcome", want["outcome"], outside["outcome"]))
            # grid.py check without the transcript: what needs it is UNKNOWN with the reason, never guessed
            bare, why = check_verdict(report, None, plain[group], cf)
            if want["claim_verdict"] == "no completion claimed":
                ok = bare["claim_verdict"] == want["claim_verdict"]
            else:
                ok = bare["claim_verdict"] == "UNKNOWN" and why.get("claim_verdict") == NO_TRANSCRIPT
            if not ok:
                disagree.append(
                    (rec["run_id"], "claim_verdict without transcript", want["claim_verdict"], bare["claim_verdict"])
                )
            if bare["outcome"] != outside["outcome"] or (
                outside["unknown"] and why.get("outcome") != outside["unknown"]
            ):
                disagree.append((rec["run_id"], "outcome without transcript", outside["outcome"], bare["outcome"]))
            if want is rec["classification"]:
                samples.setdefault(
                    want["claim_vs_outcome"],
                    {
                        "rec": rec,
                        "repo": repo,
                        "expectation": gate.task.folder / "task.toml",
                        "report": report,
                        "python": rebuilt.tasks[rec["task"]].python,
                    },
                )
    finally:
        rebuilt.close()
    return {
        "runs": len(runs),
        "trees": len(plain),
        "verified": len(verified),
        "tests": cache.misses,
        "disagree": disagree,
        "samples": samples,
    }


def _outside_truth(want: dict, evidence: Path) -> dict:
    """The grid's classification as it stands outside the grid. One difference of principle:
    the grid weighs what the agent changed under the workspace's ``.git`` (scope), while a
    repository's ``.git`` outside the grid is the team's own and is not weighed (the stored
    patch cannot carry it either). For a run whose stored diff names such paths, the
    outcome is the grid's own verifier events with those paths taken out of scope,
    classified by the grid's classifier; any other run: the record itself."""
    stored = [e for e in read_events(evidence / "events.jsonl") if e["source"] == "verifier"]
    git_dir = {p for e in stored if e["kind"] == "diff" for p in e.get("git_dir") or []}
    if not git_dir:
        return want
    for e in stored:
        if e["kind"] == "scope":
            for name in ("outside_allowed", "protected_touched"):
                e[name] = [p for p in e[name] or [] if p not in git_dir]
    outcome = classify_outcome(stored)
    return {**want, "outcome": outcome, "claim_vs_outcome": claim_vs_outcome(bool(want["claimed"]), outcome)}


def _report_text(evidence: Path) -> str:
    """The agent's final report as the grid stored it (its ``agent`` event's text)."""
    for line in (evidence / "events.jsonl").read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if e.get("source") == "agent" and e.get("kind") == "report":
            return e.get("text") or ""
    return ""


def test_verify_and_check_give_the_grids_classification_on_every_run(default_grid, tmp_path, capsys):
    result = compare_ledger(default_grid, tmp_path)
    runs = read_runs(default_grid / "runs.jsonl").values
    assert result["runs"] == len(runs) > 0
    assert result["disagree"] == []
    # many runs share a final tree: each tree is rebuilt and tested once
    assert result["trees"] < result["runs"] and result["tests"] <= result["trees"]

    # a sample through the real entry points: one run per claim-vs-outcome value the grid gave
    assert set(result["samples"]) == {r["classification"]["claim_vs_outcome"] for r in runs}
    for sample in result["samples"].values():
        rec, want = sample["rec"], sample["rec"]["classification"]
        evidence = default_grid / rec["evidence_dir"]
        final = tmp_path / "final.txt"
        final.write_text(sample["report"], encoding="utf-8")
        gate = [str(sample["repo"]), str(sample["expectation"]), "--python", sample["python"]]
        code = main(["verify", *gate, "--json"])
        verified = json.loads(capsys.readouterr().out)
        assert code == (0 if verified["outcome"] == "PASS" else 1)
        assert verified["outcome"] in (want["outcome"], "UNKNOWN" if verified["unknown"] else want["outcome"])
        facts = rec["facts"]
        ids = [
            flag
            for name, value in (
                ("--agent", facts.get("declared_agent")),
                ("--delegation-id", facts.get("delegation_id")),
                ("--parent-id", facts.get("parent_id")),
            )
            if value
            for flag in (name, value)
        ]
        main(
            [
                "check",
                "--final",
                str(final),
                "--transcript",
                str(evidence / "events.jsonl"),
                "--repo",
                gate[0],
                "--expectation",
                gate[1],
                "--python",
                gate[3],
                "--role",
                facts["role"],
                *ids,
                "--json",
            ]
        )
        checked = json.loads(capsys.readouterr().out)
        assert checked["transcript_form"] == "claimgrid events"
        assert {k: checked["verdict"][k] for k in FIELDS} == {k: want[k] for k in FIELDS}, rec["run_id"]


def _subset(folder: Path, dest: Path) -> list[dict]:
    """A ledger of one run per claim verdict and claim form of ``folder`` (the first by run
    id): every verdict the grid gave, small enough to export in a few seconds."""
    chosen: dict[tuple, dict] = {}
    for rec in sorted(read_runs(folder / "runs.jsonl").values, key=lambda r: r["run_id"]):
        c = rec["classification"]
        chosen.setdefault((c["claim_verdict"], c["claim_form"]), rec)
    (dest / "runs").mkdir(parents=True)
    shutil.copy(folder / "meta.json", dest / "meta.json")
    with open(dest / "runs.jsonl", "w", encoding="utf-8") as fh:
        for rec in chosen.values():
            fh.write(json.dumps(rec) + "\n")
            shutil.copytree(folder / rec["evidence_dir"], dest / rec["evidence_dir"])
    # Re-sealed by the publisher (the session's key) as an unfinished grid: the seal covers the
    # set of lines, so a subset is a ledger of its own, not a cut one.
    from claimgrid.store import RunStore
    from claimgrid.store.seal import load_key

    store = RunStore(dest, load_key())
    meta = store.read_meta()
    meta.update(finished=None)
    store.rewrite(list(chosen.values()))
    store.write_meta(meta)
    return list(chosen.values())


def _call(e: dict) -> tuple[str, str]:
    return e["tool"], json.dumps(e["args"], sort_keys=True)


def _chat_messages(evidence: Path) -> list[dict]:
    """The run's conversation as OpenAI-style messages: its last answered model request's
    messages, then that answer (what the gateway recorded)."""
    answered = [
        g
        for g in (json.loads(line) for line in (evidence / "gateway.jsonl").read_text().splitlines())
        if g.get("status") == 200 and (g.get("response") or {}).get("choices")
    ]
    if not answered:
        return []
    last = answered[-1]
    return [*last["request"]["messages"], last["response"]["choices"][0]["message"]]


def test_check_reads_otel_and_inspect_exports_as_it_reads_chat_messages(default_grid, tmp_path, capsys):
    need("inspect_ai")
    need("opentelemetry.sdk")
    ledger = tmp_path / "ledger"
    recs = _subset(default_grid, ledger)
    for fmt in ("otel", "inspect"):
        assert main(["export", str(ledger), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    capsys.readouterr()
    (otlp,) = (tmp_path / "otel").glob("*.json")
    logs = {json.loads(p.read_text())["eval"]["model"]: p for p in (tmp_path / "inspect").glob("*.json")}
    forms: dict[str, int] = {}
    same = 0
    for rec in recs:
        evidence = ledger / rec["evidence_dir"]
        final = tmp_path / "final.txt"
        final.write_text(_report_text(evidence), encoding="utf-8")
        chat = tmp_path / "chat.json"
        chat.write_text(json.dumps({"messages": _chat_messages(evidence)}))
        base = ["check", "--final", str(final), "--role", rec["facts"]["role"], "--json"]
        verdicts = {}
        for name, extra in (
            ("chat", [str(chat)]),
            ("otel", [str(otlp), "--run", rec["run_id"]]),
            ("inspect", [str(logs[f"claimgrid/{rec['model']}"]), "--run", rec["run_id"]]),
        ):
            main([*base, "--transcript", *extra])
            out = json.loads(capsys.readouterr().out)
            forms[out["transcript_form"]] = forms.get(out["transcript_form"], 0) + 1
            verdicts[name] = {k: out["verdict"][k] for k in FIELDS}
        # Both Inspect's messages and the chat transcript are the model's conversation.
        assert verdicts["inspect"] == verdicts["chat"], rec["run_id"]
        # The OTel trace's tool spans are the tool layer's executions, the messages the model's
        # requests: the same record wherever the tool layer ran exactly the calls the messages
        # show and each succeeded (a call it refused or that failed is where they part).
        executed = [e for e in read_events(evidence / "events.jsonl") if e["source"] == "tools"]
        requested = [e for e in read_transcript(chat).events if e["source"] == "tools"]
        if [_call(e) for e in executed] == [_call(e) for e in requested] and all(e["ok"] for e in executed):
            same += 1
            assert verdicts["otel"] == verdicts["chat"], rec["run_id"]
    assert same > len(recs) / 2  # most runs' tool layer ran every call the model requested
    assert forms == {"openai messages": len(recs), "otel trace": len(recs), "inspect log": len(recs)}
