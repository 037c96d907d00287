"""The claim judge: a model asked to read the agent's final report, a second reader with no authority.

``--claim-judge MODEL`` (``grid.py run``, ``check``, ``audit``) asks ``MODEL`` (a registered
reference model, else any LiteLLM model string) to read each run's final report with one fixed,
versioned prompt (``claim_judge.toml`` beside this module). Contracts:

* **The judge never decides.** Its answer is one evidence event (source ``judge``, kind
  ``claim_reading``: :func:`reading_event`) beside the others; the classifier reads no event of
  that source, so ``claim_stance`` and every verdict stay the deterministic reader's
  (:mod:`claimgrid.classify.claims`). The ledger sets the two side by side (LEDGER.md's claim
  judge table, each run's RUN.md), nothing more.
* **A constrained answer**: one JSON object, ``{"stance": "yes"|"no"|"partial"|"unclear",
  "sentence": "..."}`` (the corpus labels' vocabulary, :data:`claimgrid.vocab.JUDGE_STANCE`).
  An answer in any other form, a failed call, a refused reference policy: ``stance`` None and
  ``error`` says why (never a guessed stance).
* **Network only when asked**: a reference model is answered in process; a LiteLLM model
  string is called only because the user named it (hosted models are opt-in; keys from the
  environment as LiteLLM reads them).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from claimgrid.caps import JUDGE_ANSWER_MAX_CHARS, JUDGE_CALL_TIMEOUT_S, JUDGE_MAX_OUTPUT_TOKENS, JUDGE_REPORT_MAX_CHARS
from claimgrid.errors import DataError
from claimgrid.vocab import JUDGE_SOURCE, JUDGE_STANCE

PROMPT_FILE = Path(__file__).with_name("claim_judge.toml")
KIND = "claim_reading"
CUT = "\n[... the middle of the report is cut here ...]\n"
NO_REPORT = "no report to read"


@dataclass(frozen=True)
class Prompt:
    """The judge's prompt: its ``version`` (recorded in every reading), the system text, the user
    template (``{report_open}``, ``{report}``, ``{report_close}``) and the tags around the report."""

    version: str
    system: str
    user: str
    report_open: str
    report_close: str


@cache
def prompt(path: Path = PROMPT_FILE) -> Prompt:
    """The prompt file read and checked (a missing or empty field: one line naming it)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DataError(path, None, f"cannot be read as TOML ({exc})") from None
    fields = {}
    for name in ("version", "system", "user", "report_open", "report_close"):
        value = data.get(name)
        if not isinstance(value, str) or not value.strip():
            raise DataError(path, name, "must be a non-empty string")
        fields[name] = value
    if "{report}" not in fields["user"]:
        raise DataError(path, "user", "must hold {report}")
    return Prompt(**fields)


def shown(report: str) -> str:
    """The report as the judge is shown it: whole, or its head and tail past the cap."""
    if len(report) <= JUDGE_REPORT_MAX_CHARS:
        return report
    half = JUDGE_REPORT_MAX_CHARS // 2
    return report[:half] + CUT + report[-half:]


def messages(report: str, p: Prompt | None = None) -> list[dict]:
    """The chat messages one judge call sends (system, then the report in the user template)."""
    p = p or prompt()
    user = p.user.replace("{report_open}", p.report_open).replace("{report_close}", p.report_close)
    return [
        {"role": "system", "content": p.system},
        {"role": "user", "content": user.replace("{report}", shown(report))},
    ]


_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_answer(text: str | None) -> tuple[str | None, str | None, str | None]:
    """(stance, sentence, error) of the judge's answer: the one JSON object it must be (a code
    fence around it is allowed), ``stance`` one of :data:`JUDGE_STANCE`, ``sentence`` a string;
    anything else is no reading (stance None) and ``error`` says which part failed."""
    if not isinstance(text, str) or not text.strip():
        return None, None, "empty answer"
    body = text.strip()
    fence = re.fullmatch(r"```[a-zA-Z]*\s*(.*?)\s*```", body, re.S)
    if fence:
        body = fence.group(1)
    try:
        obj = json.loads(body)
    except ValueError:
        m = _OBJECT.search(body)
        try:
            obj = json.loads(m.group(0)) if m else None
        except ValueError:
            obj = None
        if obj is None:
            return None, None, "answer is not a JSON object"
    if not isinstance(obj, dict):
        return None, None, "answer is not a JSON object"
    stance, sentence = obj.get("stance"), obj.get("sentence")
    if stance not in JUDGE_STANCE:
        return None, None, f"field stance must be one of {', '.join(JUDGE_STANCE)}, not {stance!r}"
    if not isinstance(sentence, str):
        return stance, None, "field sentence must be a string"
    return stance, sentence, None


def _ask_reference(name: str, msgs: list[dict]) -> str:
    from claimgrid.reference import registry

    entry = registry.get(name)
    assert entry is not None
    try:
        turn = entry.policy(None, msgs)
    except Exception as exc:  # a policy written for agent runs, not for the judge's prompt
        raise RuntimeError(f"reference model {name} does not answer the judge prompt ({type(exc).__name__})") from None
    return str(getattr(turn, "content", "") or "")


def _ask_litellm(model: str, msgs: list[dict]) -> str:
    import claimgrid.gateway.offline  # noqa: F401  # LiteLLM fetches nothing of its own (set before its import)

    # isort: split
    import litellm

    litellm.suppress_debug_info = True  # its provider-list banner is not the command's output
    resp = litellm.completion(
        model=model,
        messages=msgs,
        temperature=0,
        max_tokens=JUDGE_MAX_OUTPUT_TOKENS,
        timeout=JUDGE_CALL_TIMEOUT_S,
        response_format={"type": "json_object"},
        drop_params=True,  # a provider without JSON mode still gets the prompt's constraint
    )
    return str(resp.choices[0].message.content or "")


def is_reference(model: str) -> bool:
    from claimgrid.reference import registry

    return registry.is_reference(model)


def check_judge(model: str) -> None:
    """Before anything is read or written: a reference judge passes; any other MODEL must be one
    the gateway's preflight can serve (LiteLLM knows its provider, its key is set, its server
    answers), else one line naming the flag (a typo is not hundreds of runs without a reading)."""
    from claimgrid.errors import ClaimgridError
    from claimgrid.gateway import preflight

    try:
        preflight([model])
    except ClaimgridError as exc:
        raise ClaimgridError(f"--claim-judge {model}: {exc}") from None


def reading_event(model: str, report: str | None) -> dict:
    """The judge's reading of ``report`` as one evidence event (source ``judge``); a failed call
    is recorded too, with ``error`` and no stance (the run goes on: the judge decides nothing)."""
    p = prompt()
    event: dict = {"source": JUDGE_SOURCE, "kind": KIND, "model": model, "prompt_version": p.version}
    if not (report or "").strip():
        return event | {"error": NO_REPORT}  # nothing to read: no call (a hosted judge is not paid for nothing)
    msgs = messages(report or "", p)
    try:
        answer = _ask_reference(model, msgs) if is_reference(model) else _ask_litellm(model, msgs)
    except Exception as exc:  # any provider failure: recorded as no reading, never raised into the run
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return event | {"error": f"{type(exc).__name__}: {first}"[:300]}
    stance, sentence, error = parse_answer(answer)
    found = {"stance": stance, "sentence": sentence, "error": error, "answer": answer[:JUDGE_ANSWER_MAX_CHARS]}
    return event | {k: v for k, v in found.items() if v is not None}  # a key left out: not given


def reader_label(claim_stance: str | None) -> str:
    """The deterministic reader's ``claim_stance`` in the judge's vocabulary: success -> yes,
    partial -> partial, UNKNOWN -> unclear, any other stance (failure, hedged, retracted,
    none: no success claimed) -> no."""
    return {"success": "yes", "partial": "partial", "UNKNOWN": "unclear"}.get(str(claim_stance), "no")


def agrees(claim_stance: str | None, judge_stance: str | None) -> bool | None:
    """Whether the judge read the report as the deterministic reader did (None: no reading)."""
    if judge_stance not in JUDGE_STANCE:
        return None
    return reader_label(claim_stance) == judge_stance
