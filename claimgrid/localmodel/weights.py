"""Where a local model's GGUF file is (models/local.toml ``weights``), and its sha256."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.localmodel.catalog import LocalModel


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_file(module: str, resource: str, catalog: Path, field: str) -> Path:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise DataError(catalog, field, f"package '{module}' is not installed (uv sync --extra local-model)")
    path = Path(list(spec.submodule_search_locations)[0]) / resource
    if not path.is_file():
        raise DataError(catalog, field, f"{path}: no such file in package '{module}'")
    return path


def resolve(name: str, model: LocalModel, catalog: Path, cache_root: Path) -> tuple[Path, str]:
    """The GGUF's path and sha256 (DataError naming the catalog's field when it is missing
    or its sha256 differs from the entry's). ``parts`` are joined once into ``cache_root``."""
    w, field = model.weights, f"models.{name}.weights"
    if w.path is not None:
        path = Path(w.path) if os.path.isabs(w.path) else Path(catalog).parent / w.path
        if not path.is_file():
            raise DataError(catalog, field + ".path", f"{path}: no such file")
    elif w.package is not None:
        path = _package_file(w.package, w.resource or "", catalog, field + ".package")
    else:
        assert w.parts is not None and w.sha256 is not None  # the catalog's validator
        path = cache_root / f"{name}-{w.sha256[:16]}.gguf"
        if not path.is_file():
            parts = [_package_file(m, r, catalog, field + ".parts") for m, r in (p.split(":", 1) for p in w.parts)]
            cache_root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".weights-", dir=cache_root)
            try:
                with os.fdopen(fd, "wb") as out:
                    for part in parts:
                        with open(part, "rb") as f:
                            for block in iter(lambda: f.read(1 << 20), b""):
                                out.write(block)
                if sha256_file(Path(tmp)) != w.sha256:
                    raise DataError(catalog, field + ".sha256", "the joined parts have another sha256")
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    sha = sha256_file(path)
    if w.sha256 is not None and sha != w.sha256:
        raise DataError(catalog, field + ".sha256", f"{path} has sha256 {sha}")
    return path, sha
