"""Import paths of the previous release, kept working for this release with a warning.

The driver package was laid out by pipeline stage (``commands``, ``inputs``, ``execute``,
``gateway``, ``reference``, ``verify``, ``classify``, ``store``, ``ledger``). A policy file or
script that imports a module by its old path (``claimgrid.registry``,
``claimgrid.gateway.policies``, ...) gets the module at its new path, the very same module
object, and one ``DeprecationWarning`` naming the new path. Remove after one release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "claimgrid.admission": "claimgrid.execute.admission",
    "claimgrid.backends": "claimgrid.execute",
    "claimgrid.backends.ray": "claimgrid.execute.ray",
    "claimgrid.cells": "claimgrid.execute.cells",
    "claimgrid.claims": "claimgrid.classify.claims",
    "claimgrid.classifier": "claimgrid.classify.classifier",
    "claimgrid.cli": "claimgrid.commands.cli",
    "claimgrid.conditions": "claimgrid.inputs.conditions",
    "claimgrid.evidence": "claimgrid.classify.evidence",
    "claimgrid.faults": "claimgrid.classify.reactions",
    "claimgrid.gateway.cli": "claimgrid.commands.serve_gateway",
    "claimgrid.gateway.faults": "claimgrid.reference.gateway_faults",
    "claimgrid.gateway.policies": "claimgrid.reference.policies",
    "claimgrid.gateway.records": "claimgrid.gateway.exchanges",
    "claimgrid.gateway.reference": "claimgrid.gateway.scripted",
    "claimgrid.gateway.replay": "claimgrid.gateway.recorded",
    "claimgrid.gateway.script": "claimgrid.reference.script",
    "claimgrid.grid": "claimgrid.commands.run",
    "claimgrid.guard": "claimgrid.sandbox.guard",
    "claimgrid.launch.guard": "claimgrid.launch.confine",
    "claimgrid.launch.records": "claimgrid.launch.handles",
    "claimgrid.ledger.evidence": "claimgrid.ledger.digest",
    "claimgrid.ledger.truth": "claimgrid.ledger.facts",
    "claimgrid.node": "claimgrid.execute.node",
    "claimgrid.paths": "claimgrid.globs",
    "claimgrid.realmodels": "claimgrid.execute.spending",
    "claimgrid.record": "claimgrid.store.record",
    "claimgrid.reference_truth": "claimgrid.reference.truth",
    "claimgrid.registry": "claimgrid.reference.registry",
    "claimgrid.replay": "claimgrid.commands.replay",
    "claimgrid.runner": "claimgrid.execute.runner",
    "claimgrid.scaffold": "claimgrid.commands.new_framework",
    "claimgrid.schema": "claimgrid.inputs.schema",
    "claimgrid.taskcheck": "claimgrid.commands.check_task",
    "claimgrid.tasks": "claimgrid.inputs.tasks",
    "claimgrid.validate": "claimgrid.commands.validate",
    "claimgrid.venvs": "claimgrid.inputs.venvs",
    "claimgrid.verifier": "claimgrid.verify.verifier",
    "claimgrid.verify_cache": "claimgrid.verify.cache",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        # The module object is the new module itself: nothing to execute again. The import
        # system stores it under the old name, so ``import old`` and ``import new`` agree.
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there (the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=3,
        )
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        # First: an old name under a moved package (``claimgrid.backends.ray``) would otherwise be
        # found by the path finder through the new package's __path__ and loaded a second time.
        sys.meta_path.insert(0, _MovedFinder())
