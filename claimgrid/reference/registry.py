"""The reference-model registry: each model's policy and its true behaviour, defined together.

A reference model is one entry: a name, a policy (a pure function ``(script, messages) ->
Turn`` the gateway serves), a one-line description, and ``truth`` (what a correct
classifier must say about a run of it, field by field: claim verdict, outcome, claim vs
outcome, injection, legitimate, declarations, channels, swap, process). The built-in
models (``claimgrid/reference/policies.py``) are registered through the same decorator a
user's file uses:

    from claimgrid.reference import Turn, reference_model

    @reference_model("mute", behaviour="answers with an empty message",
                     truth=lambda cell: {"claim_verdict": "no completion claimed"})
    def mute(script, messages):
        return Turn(content="")

``grid.py run --policies FILE.py`` imports FILE.py, whose decorators add its entries; the
grid records each file's path, sha256 and models in ``meta.json`` (``policy_files``). A
command that reads a stored grid (``--resume``, ``reclassify``, ``replay``) loads only the
files its user names with ``--policies``, each checked against that sha256
(:func:`load_recorded`): nothing inside a ledger folder is ever imported. The default grid's models are the entries registered
with ``default=True``, in registration order; the default substitute is the one entry
registered with ``substitute=True``.

A model may be limited to some conditions (``runs_in``: a predicate over the content and
swap condition objects, never their names); ``claimgrid.execute.cells.plan`` crosses it only with
those. The fault models use :func:`untreated`: what a framework does with a fault is the
finding, so they run on the untreated content condition (``carries`` is None) without a
swap (``unavailable_from_call < 0``). A fault model is registered with ``fault=True``
(records get ``faults`` facts), and a probe with ``probe=Probe(...)``: a gateway-side
fault (a ``claimgrid.reference.gateway_faults.GatewayFault`` the gateway applies at its call
index), a tool fault or an output shape.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimgrid.errors import ClaimgridError
from frameworks._harness.harness_shared.probe_kinds import ShapeKind, parse

Truth = dict[str, Any]  # classification field -> value a correct classifier gives; absent = no claim


@dataclass(frozen=True)
class Probe:
    """What a probe model's runs get beside its policy's answers, each part None when absent:
    ``gateway_fault``, the ``claimgrid.reference.gateway_faults.GatewayFault`` the gateway
    applies at its call index; ``tool_fault``, the ``claimgrid.reference.tool_faults.ToolFault``
    the harness tool layer applies; ``shape``, the output-shape kind
    (``claimgrid.reference.shapes``) the classifier's reactions read."""

    gateway_fault: Any = None
    tool_fault: Any = None
    shape: str | None = None  # a ShapeKind (a string is parsed into one; an unknown kind is refused)

    def __post_init__(self) -> None:
        if self.shape is not None:
            object.__setattr__(self, "shape", parse(ShapeKind, self.shape, "Probe.shape"))


NO_PROBE = Probe()


@dataclass(frozen=True)
class ReferenceModel:
    name: str
    policy: Callable[..., Any]
    behaviour: str
    truth: Callable[[TruthCell], Truth] | None = None
    default: bool = False
    substitute: bool = False
    origin: str = "claimgrid"
    runs_in: Callable[[Any, Any], bool] | None = None  # (content, swap) condition -> crossed with it; None: all
    fault: bool = False  # a fault model: what the framework does with it is the finding
    probe: Probe = NO_PROBE  # data on the entry: a copy under another name keeps it

    @property
    def gateway_fault(self) -> Any:
        return self.probe.gateway_fault

    @property
    def tool_fault(self) -> Any:
        return self.probe.tool_fault

    @property
    def shape(self) -> str | None:
        return self.probe.shape

    def runs_with(self, content, swap) -> bool:
        """True when the grid crosses this model with the content and swap condition objects."""
        return self.runs_in is None or bool(self.runs_in(content, swap))


def untreated(content, swap) -> bool:
    """The untreated cell: content carrying no instruction, and no swap."""
    return content.carries is None and swap.unavailable_from_call < 0


_REGISTRY: dict[str, ReferenceModel] = {}
_LOADED: set[Path] = set()
_FILES: dict[Path, dict] = {}  # path -> {"path", "sha256", "models"}: the policy files imported


def register(entry: ReferenceModel) -> ReferenceModel:
    """Add one entry; a name already taken is an error naming both origins."""
    if entry.name in _REGISTRY:
        raise ClaimgridError(
            f"{entry.origin}: reference model '{entry.name}' is already defined by {_REGISTRY[entry.name].origin}"
        )
    if not entry.name or "/" in entry.name:
        raise ClaimgridError(
            f"{entry.origin}: reference model name '{entry.name}' must be non-empty "
            "and contain no '/' (that form is a LiteLLM model string)"
        )
    _REGISTRY[entry.name] = entry
    return entry


def origin_of(module: str) -> str:
    """ "claimgrid" for built-ins, else the file that registered the entry."""
    if module.startswith("claimgrid."):
        return "claimgrid"
    return str(getattr(sys.modules.get(module), "__file__", None) or module)


def reference_model(
    name: str,
    *,
    behaviour: str,
    truth: Callable[[TruthCell], Truth] | None = None,
    default: bool = False,
    substitute: bool = False,
    runs_in: Callable[[Any, Any], bool] | None = None,
    fault: bool = False,
    probe: Probe = NO_PROBE,
):
    """Decorator: register the decorated policy as reference model ``name``.

    ``runs_in(content, swap)``: the conditions the grid crosses it with (None: all);
    ``fault``: a fault model (records carry fault facts); ``probe``: what its runs get
    beside its answers (a :class:`Probe`: a gateway fault, which implies ``fault``, a tool
    fault, an output shape). Anything but a ``Probe`` is an error naming the file."""

    def deco(policy):
        origin = origin_of(policy.__module__)
        if not isinstance(probe, Probe):
            raise ClaimgridError(
                f"{origin}: reference model '{name}': probe must be a claimgrid.reference.Probe, "
                f"not {type(probe).__name__}"
            )
        register(
            ReferenceModel(
                name,
                policy,
                behaviour,
                truth,
                default,
                substitute,
                origin,
                runs_in,
                fault or probe.gateway_fault is not None,
                probe,
            )
        )
        return policy

    return deco


def models() -> dict[str, ReferenceModel]:
    return dict(_REGISTRY)


def get(name: str) -> ReferenceModel | None:
    return _REGISTRY.get(name)


def is_reference(name: str) -> bool:
    return get(name) is not None


def default_models() -> list[str]:
    return [m.name for m in models().values() if m.default]


def fault_models() -> list[str]:
    """Names of the registered fault models (a derived view; the entries are the source)."""
    return [m.name for m in models().values() if m.fault]


def default_substitute() -> str:
    subs = [m.name for m in models().values() if m.substitute]
    if len(subs) != 1:
        raise ClaimgridError(f"exactly one reference model must be registered with substitute=True, found {subs}")
    return subs[0]


class _Names(Sequence):
    """A live, ordered view of the registered names (plugins loaded later appear too)."""

    def __getitem__(self, i):
        return tuple(models())[i]

    def __len__(self):
        return len(models())

    def __contains__(self, name):
        return is_reference(name) if isinstance(name, str) else False

    def __repr__(self):
        return repr(tuple(models()))


NAMES = _Names()


def file_sha256(path: Path | str) -> str:
    """The sha256 (hex) of a policy file's bytes, as recorded in ``meta.json`` ``policy_files``."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def loaded_files() -> list[dict]:
    """Every policy file imported so far: ``{"path", "sha256", "models"}`` (what ``meta.json``
    ``policy_files`` records, so that a reader can check the file they name against it)."""
    return [dict(info) for info in _FILES.values()]


def load_policies(path: Path | str, expect_sha256: str | None = None) -> list[str]:
    """Import a user's policy file; returns the names it registered. One-line errors.

    The file is read once; with ``expect_sha256`` those bytes must hash to it or nothing is
    executed (the bytes checked are the bytes run)."""
    path = Path(path).resolve()
    if path in _LOADED:
        if expect_sha256 and _FILES[path]["sha256"] != expect_sha256:
            raise ClaimgridError(f"--policies {path}: already loaded with another sha256")
        return []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ClaimgridError(f"--policies {path}: file not found") from None
    except OSError as exc:
        raise ClaimgridError(f"--policies {path}: cannot be read ({exc.strerror or exc})") from None
    sha = hashlib.sha256(data).hexdigest()
    if expect_sha256 and sha != expect_sha256:
        raise ClaimgridError(f"--policies {path}: sha256 {sha[:16]} differs from the recorded {expect_sha256[:16]}")
    before = set(_REGISTRY)
    mod_name = f"claimgrid_user_policies_{len(_LOADED)}_{path.stem}"
    spec = importlib.util.spec_from_loader(mod_name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[mod_name] = module
    try:
        exec(compile(data, str(path), "exec"), module.__dict__)  # noqa: S102 - the user named this file
    except Exception as exc:  # a user's file: one line naming it, not a traceback; nothing half-registered
        for name in set(_REGISTRY) - before:
            del _REGISTRY[name]
        sys.modules.pop(mod_name, None)
        if isinstance(exc, ClaimgridError):
            raise
        raise ClaimgridError(f"--policies {path}: {type(exc).__name__}: {exc}") from None
    _LOADED.add(path)
    added = [n for n in _REGISTRY if n not in before]
    if not added:
        raise ClaimgridError(f"--policies {path}: registers no reference model (use @reference_model)")
    _FILES[path] = {"path": str(path), "sha256": sha, "models": added}
    return added


def load_recorded(
    recorded: list[dict], legacy: list[str], given: Sequence[Path | str], where: Path | str, ledger: Path | str
) -> list[str]:
    """Load the policy files a stored grid used, only from the files the user names (``given``).

    ``recorded``: the grid's ``policy_files`` entries (path, sha256, models); ``legacy``: its
    ``policies`` paths (a ledger older than the hashes); ``where``: its meta.json, for the
    message; ``ledger``: the folder read (a given file inside it is refused: nothing in a
    ledger folder is ever executed). Nothing at a recorded path is read: each recorded file must be one of ``given``
    with the same sha256, or this refuses in one line naming the models and the file. A given
    file that matches no recorded one is loaded too (more models). Returns the given files,
    resolved, in order: the grid's policy files from now on."""
    files = [Path(p).resolve() for p in given]
    digests: dict[Path, str] = {}
    for f in files:
        if f.is_relative_to(Path(ledger).resolve()):
            raise ClaimgridError(f"--policies {f}: inside the ledger folder {ledger}; nothing in a ledger is executed")
        try:
            digests[f] = file_sha256(f)
        except FileNotFoundError:
            raise ClaimgridError(f"--policies {f}: file not found") from None
        except OSError as exc:
            raise ClaimgridError(f"--policies {f}: cannot be read ({exc.strerror or exc})") from None
    hashed = {str(e.get("path")) for e in recorded}
    for entry in recorded:
        sha, name = str(entry.get("sha256")), Path(str(entry.get("path"))).name
        models_of = ", ".join(entry.get("models") or []) or "(none)"
        match = next((f for f in files if digests[f] == sha), None)
        if match is not None:
            continue
        same_name = next((f for f in files if f.name == name), None)
        if same_name is not None:
            raise ClaimgridError(
                f"--policies {same_name}: sha256 {digests[same_name][:16]} differs from the {sha[:16]} recorded in "
                f"{where} for reference model(s) {models_of} ({entry.get('path')}); nothing was loaded"
            )
        raise ClaimgridError(
            f"{where}: reference model(s) {models_of} come from policy file {entry.get('path')} (sha256 {sha[:16]}); "
            f"name that file with --policies FILE (nothing in a ledger folder is loaded)"
        )
    for path in legacy:
        if path in hashed:
            continue
        if not any(f.name == Path(path).name for f in files):
            raise ClaimgridError(
                f"{where}: the grid used policy file {path} (no sha256 recorded); name it with --policies FILE "
                f"(nothing in a ledger folder is loaded)"
            )
    for f in files:
        load_policies(f, digests[f])
    return [str(f) for f in files]


# ---------------------------------------------------------------- truth


@dataclass(frozen=True)
class TruthCell:
    """What decides a reference run's true behaviour: the cell, and which model served which call.

    ``served(i)`` is the model that answered model call ``i`` (None: refused, ``bound``).
    """

    task: Any  # claimgrid.inputs.tasks.Task
    content: Any  # claimgrid.inputs.conditions.ContentCondition
    swap: Any  # claimgrid.inputs.conditions.SwapCondition
    model: str
    substitute: str
    max_model_calls: int = 24

    @property
    def carries(self) -> str | None:
        return self.content.carries

    def served(self, i: int) -> str | None:
        k = self.swap.unavailable_from_call
        if k < 0 or i < k:
            return self.model
        return self.substitute if self.swap.on_unavailable == "substitute" else None


def truth_of(cell: TruthCell) -> Truth:
    """The registered truth of the cell's model, or {} when the model states none."""
    entry = get(cell.model)
    if entry is None or entry.truth is None:
        return {}
    return entry.truth(cell)
