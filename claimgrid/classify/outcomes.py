"""Verdicts another harness recorded: ``grid.py check --outcome-from FILE``.

A run made elsewhere was often verified there. Its recorded verdict is read, told apart by
content (never by the file's name), and mapped to the outcome vocabulary as the evidence
source ``external`` (:data:`claimgrid.vocab.EXTERNAL_SOURCE`): recorded by another harness,
trusted as that harness's verdict, below claimgrid's own verifier (``--repo`` with
``--expectation`` wins where both exist).

| form | detected by | PASS | TESTS_FAIL | UNKNOWN |
|---|---|---|---|---|
| Harbor ``result.json`` | ``verifier_result`` (with ``rewards``) or ``trial_name`` / ``task_name`` | reward 1 | reward 0 | a partial reward (kept as a number), no verifier result, an exception before the verifier |
| SWE-bench ``report.json`` | an object with ``resolved`` (or ``{instance_id: {...resolved...}}``) | ``resolved`` true | ``resolved`` false with the patch applied | the patch not applied or missing |
| CTRF JSON | ``results.tool`` with ``results.summary`` | tests ran, none failed | a test failed | no test ran |
| JUnit XML | ``<testsuite>`` / ``<testsuites>`` root | tests ran, no failure or error | a failure or error | no test ran |
| Inspect log score | an eval log (``eval`` and ``samples``, or a ``.eval`` zip) | the sample's score is ``C`` / 1 / true | ``I`` / 0 / false | a partial score (a number) or none |

A partial reward is never ``PASS``: it is kept in ``reward`` and the outcome is ``UNKNOWN``
(neither all tests passed nor the task failed outright, so no claim is accused on it).
Anything that is none of these is a :class:`claimgrid.errors.DataError` naming the file.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.vocab import EXTERNAL_SOURCE

FORMS = ("harbor result", "swe-bench report", "ctrf", "junit xml", "inspect score")


@dataclass(frozen=True)
class ExternalOutcome:
    """One recorded verdict: ``outcome`` (``PASS``, ``TESTS_FAIL`` or ``UNKNOWN``), the ``form``
    it was read from (:data:`FORMS`), the ``reward`` as recorded (a number, None when the form
    has none), tests ``passed`` / ``failed`` when it counts them, ``why`` (one line: what
    decided), ``path`` and ``source`` (always ``external``)."""

    outcome: str
    form: str
    why: str
    path: str
    reward: float | None = None
    passed: int | None = None
    failed: int | None = None
    source: str = EXTERNAL_SOURCE

    def to_json(self) -> dict:
        return asdict(self)


def obj(value) -> dict:
    return value if isinstance(value, dict) else {}


def _reward(value) -> tuple[str, str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "UNKNOWN", f"reward {value!r} is not a number"
    if value >= 1:
        return "PASS", f"reward {value}"
    if value <= 0:
        return "TESTS_FAIL", f"reward {value}"
    return "UNKNOWN", f"partial reward {value}: neither a pass nor a failure"


def _harbor(path: Path, doc: dict) -> ExternalOutcome:
    verifier = doc.get("verifier_result")
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    if isinstance(rewards, dict) and rewards:
        value = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
        outcome, why = _reward(value)
        reward = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return ExternalOutcome(outcome, "harbor result", f"Harbor verifier_result: {why}", str(path), reward)
    exception = doc.get("exception_info")
    kind = exception.get("exception_type") if isinstance(exception, dict) else None
    why = f"no verifier result (the trial raised {kind})" if kind else "no verifier result"
    return ExternalOutcome("UNKNOWN", "harbor result", why, str(path))


def _swebench(path: Path, doc: dict, select: str | None) -> ExternalOutcome:
    report = doc
    if "resolved" not in doc:
        entries = {k: v for k, v in doc.items() if isinstance(v, dict) and "resolved" in v}
        if select is not None:
            entries = {k: v for k, v in entries.items() if k == select}
        if len(entries) != 1:
            raise DataError(path, "--run", f"the report holds {len(entries)} instances: name one with --run")
        report = next(iter(entries.values()))
    status = obj(report.get("tests_status"))
    passed = sum(len(obj(v).get("success") or []) for v in status.values())
    failed = sum(len(obj(v).get("failure") or []) for v in status.values())
    counts: dict = {"passed": passed, "failed": failed} if status else {}
    if report.get("resolved") is True:
        return ExternalOutcome("PASS", "swe-bench report", "SWE-bench report: resolved", str(path), 1.0, **counts)
    if report.get("patch_is_None") or report.get("patch_exists") is False:
        return ExternalOutcome("UNKNOWN", "swe-bench report", "SWE-bench report: no patch", str(path), **counts)
    if report.get("patch_successfully_applied") is False:
        why = "SWE-bench report: the patch did not apply"
        return ExternalOutcome("UNKNOWN", "swe-bench report", why, str(path), **counts)
    if report.get("resolved") is False:
        why = f"SWE-bench report: not resolved ({failed} required test(s) failing)"
        return ExternalOutcome("TESTS_FAIL", "swe-bench report", why, str(path), 0.0, **counts)
    return ExternalOutcome("UNKNOWN", "swe-bench report", "SWE-bench report: resolved not stated", str(path))


def _tests(form: str, path: Path, passed: int, failed: int, ran: int) -> ExternalOutcome:
    if ran <= 0:
        return ExternalOutcome("UNKNOWN", form, "no test ran", str(path), passed=passed, failed=failed)
    if failed:
        return ExternalOutcome(
            "TESTS_FAIL", form, f"{failed} of {ran} test(s) failed", str(path), passed=passed, failed=failed
        )
    return ExternalOutcome("PASS", form, f"all {passed} test(s) passed", str(path), passed=passed, failed=failed)


def _ctrf(path: Path, doc: dict) -> ExternalOutcome:
    summary = obj(doc["results"].get("summary"))
    num = {k: v if isinstance(v := summary.get(k), int) else 0 for k in ("tests", "passed", "failed")}
    failed = num["failed"]
    ran = num["passed"] + failed  # pending, skipped and "other" tests neither passed nor failed
    return _tests("ctrf", path, num["passed"], failed, ran)


def _junit(path: Path, raw: bytes) -> ExternalOutcome:
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise DataError(path, None, f"not readable JUnit XML: {exc}") from None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = [c for s in suites for c in s.iter("testcase")]
    if cases:
        bad = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
        skipped = sum(1 for c in cases if c.find("skipped") is not None)
        ran = len(cases) - skipped
        return _tests("junit xml", path, ran - bad, bad, ran)

    def count(key: str) -> int:
        total = 0
        for s in suites:
            try:
                total += int(s.get(key) or 0)
            except ValueError:
                pass
        return total

    ran = count("tests") - count("skipped")
    bad = count("failures") + count("errors")
    return _tests("junit xml", path, ran - bad, bad, ran)


def _inspect(path: Path, samples: list, select: str | None) -> ExternalOutcome:
    samples = [s for s in samples if isinstance(s, dict)]
    if select is not None:
        samples = [s for s in samples if str(s.get("id")) == select]
    if len(samples) != 1:
        raise DataError(path, "--run", f"the Inspect log holds {len(samples)} samples: name one with --run")
    scores = obj(samples[0].get("scores"))
    if not scores:
        return ExternalOutcome("UNKNOWN", "inspect score", "the sample has no score", str(path))
    name, score = next(iter(scores.items()))
    value = score.get("value") if isinstance(score, dict) else score
    mapped = {"C": 1.0, "I": 0.0, True: 1.0, False: 0.0}
    number = mapped.get(value, value) if isinstance(value, (str, bool)) else value
    outcome, why = _reward(number)
    reward = float(number) if isinstance(number, (int, float)) and not isinstance(number, bool) else None
    return ExternalOutcome(outcome, "inspect score", f"Inspect score {name}={value!r}: {why}", str(path), reward)


def read_outcome(path: Path, select: str | None = None) -> ExternalOutcome:
    """The verdict recorded in ``path`` (module docstring); ``select`` names one instance of a
    SWE-bench report or one sample of an Inspect log holding several."""
    path = Path(path)
    if path.is_dir():  # a Harbor trial folder: its result.json
        path = path / "result.json"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(path, None, f"cannot read the result: {exc.strerror}") from None
    if raw[:2] == b"PK":
        try:
            with zipfile.ZipFile(path) as z:
                names = sorted(n for n in z.namelist() if n.startswith("samples/") and n.endswith(".json"))
                return _inspect(path, [json.loads(z.read(n)) for n in names], select)
        except (zipfile.BadZipFile, ValueError, KeyError) as exc:
            raise DataError(path, None, f"not a readable Inspect .eval log: {exc}") from None
    if raw.lstrip()[:1] == b"<":
        return _junit(path, raw)
    try:
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        if isinstance(doc.get("results"), dict) and isinstance(doc["results"].get("tool"), dict):
            return _ctrf(path, doc)
        if "verifier_result" in doc or ("trial_name" in doc and "task_name" in doc):
            return _harbor(path, doc)
        if isinstance(doc.get("eval"), dict) and isinstance(doc.get("samples"), list):
            return _inspect(path, doc["samples"], select)
        if "resolved" in doc or any(isinstance(v, dict) and "resolved" in v for v in doc.values()):
            return _swebench(path, doc, select)
    raise DataError(
        path,
        None,
        "not a recorded verdict in a known form (a Harbor result.json, a SWE-bench report.json, "
        "a CTRF JSON, a JUnit XML, an Inspect log with scores)",
    )
