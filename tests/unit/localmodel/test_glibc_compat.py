"""The engine's libraries made loadable on an older glibc (claimgrid.localmodel.glibc_compat.py):
the edit maps exactly the four C23 symbols to their C99 functions and nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from claimgrid.errors import ClaimgridError
from claimgrid.localmodel.glibc_compat import elf_hash, needs, patch_library

from tests import extras


extras.need("local-model", "llama_cpp_py_sync")


def _libs() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp_py_sync")
    assert spec is not None and spec.origin
    return sorted(p for p in Path(spec.origin).parent.iterdir() if p.name.startswith("lib") and ".so" in p.name)


@pytest.mark.parametrize("lib", _libs(), ids=lambda p: p.name)
def test_patch_maps_only_the_c23_symbols(lib):
    data = bytearray(lib.read_bytes())
    before_syms, before_vers = needs(data)
    renamed = patch_library(data)
    after_syms, after_vers = needs(data)
    c23 = {s for s in before_syms if s.startswith("__isoc23_")}
    assert renamed >= len(c23)  # one name may stand in several symbol entries
    assert not any(s.startswith("__isoc23_") for s in after_syms)
    assert after_syms == (before_syms - c23) | {s.removeprefix("__isoc23_") for s in c23}
    assert "GLIBC_2.38" not in after_vers and after_vers <= before_vers | {"GLIBC_2.2.5"}
    assert len(data) == lib.stat().st_size
    assert patch_library(data) == 0  # a patched copy needs nothing more


def test_not_an_elf_library_is_refused():
    with pytest.raises(ClaimgridError):
        patch_library(bytearray(b"MZ" + b"\0" * 100))


def test_elf_hash_known_value():
    assert elf_hash(b"GLIBC_2.2.5") == 0x09691A75  # the vna_hash glibc's own libraries carry
