"""The engine's native libraries, loadable on this machine's C library.

``llama-cpp-py-sync`` ships llama.cpp prebuilt (``libllama.so``, ``libggml-*.so``) in a
wheel tagged manylinux2014, but its libraries were linked against glibc 2.38 and ask for
four symbols that glibc only has since 2.38: ``__isoc23_strtol``, ``__isoc23_strtoul``,
``__isoc23_strtoull`` and ``__isoc23_sscanf`` (C23's variants, which differ from the C99
functions only in also reading a ``0b`` binary prefix). On an older glibc (Debian 12 has
2.36) the wheel's libraries do not load at all.

Where the host's glibc is older, :func:`library_dir` copies the wheel's libraries into a
cache folder and edits the copies' dynamic symbol table: each of those four undefined
symbols is renamed to its C99 function (its name pointer moved past the ``__isoc23_``
prefix, inside the same string) and the ``GLIBC_2.38`` version it asked for becomes
``GLIBC_2.2.5``, the version those C99 functions have on x86-64. Nothing else changes;
any other symbol version newer than the host's is an error naming it. The copies are made
once per wheel (keyed by the libraries' sha256) and the wheel itself is never modified.
On glibc 2.38 or newer the wheel's own folder is used as it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tempfile
from pathlib import Path

from claimgrid.errors import ClaimgridError

PREFIX = b"__isoc23_"
C23_TO_C99 = {b"__isoc23_strtol", b"__isoc23_strtoul", b"__isoc23_strtoull", b"__isoc23_sscanf"}
NEW_VERSION, OLD_VERSION = b"GLIBC_2.38", b"GLIBC_2.2.5"
SHT_DYNSYM, SHT_VERNEED = 11, 0x6FFFFFFE


def glibc_version() -> tuple[int, int]:
    """The host's glibc (major, minor); (0, 0) when it is not glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return (0, 0)
    parts = text.split()[-1].split(".") if text.startswith("glibc") else []
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 else (0, 0)


def elf_hash(name: bytes) -> int:
    """The SysV ELF hash (``vna_hash`` of a version reference)."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _cstr(data: bytes | bytearray, offset: int) -> bytes:
    return bytes(data[offset : data.index(b"\0", offset)])


def patch_library(data: bytearray) -> int:
    """Edit one ELF64 little-endian shared library in place (see the module docstring);
    returns how many symbols were renamed. Raises ClaimgridError for a file it cannot edit."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ClaimgridError("not an ELF64 little-endian library")
    shoff, shentsize, shnum = struct.unpack_from("<Q", data, 0x28)[0], *struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        sh_type = struct.unpack_from("<I", data, off + 4)[0]
        sh_offset, sh_size = struct.unpack_from("<QQ", data, off + 0x18)
        sh_link = struct.unpack_from("<I", data, off + 0x28)[0]
        sh_entsize = struct.unpack_from("<Q", data, off + 0x38)[0]
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    renamed = 0
    for sh_type, sh_offset, sh_size, sh_link, sh_entsize in sections:
        strtab = sections[sh_link][1]
        if sh_type == SHT_DYNSYM:
            for off in range(sh_offset, sh_offset + sh_size, sh_entsize or 24):
                st_name = struct.unpack_from("<I", data, off)[0]
                st_shndx = struct.unpack_from("<H", data, off + 6)[0]
                name = _cstr(data, strtab + st_name)
                if st_shndx == 0 and name.startswith(PREFIX):
                    if name not in C23_TO_C99:
                        raise ClaimgridError(f"needs {name.decode()}, which this glibc lacks")
                    struct.pack_into("<I", data, off, st_name + len(PREFIX))
                    renamed += 1
        elif sh_type == SHT_VERNEED:
            off = sh_offset
            while True:
                vn_cnt, _vn_file, vn_aux, vn_next = struct.unpack_from("<HIII", data, off + 2)
                auxes, aux = [], off + vn_aux
                for _ in range(vn_cnt):
                    auxes.append(aux)
                    aux += struct.unpack_from("<I", data, aux + 12)[0]
                names = {_cstr(data, strtab + struct.unpack_from("<I", data, a + 8)[0]): a for a in auxes}
                if NEW_VERSION in names:
                    if OLD_VERSION not in names:
                        raise ClaimgridError(f"asks for {NEW_VERSION.decode()} but not {OLD_VERSION.decode()}")
                    old_name = struct.unpack_from("<I", data, names[OLD_VERSION] + 8)[0]
                    struct.pack_into("<I", data, names[NEW_VERSION], elf_hash(OLD_VERSION))
                    struct.pack_into("<I", data, names[NEW_VERSION] + 8, old_name)
                for name in names:
                    if name.startswith(b"GLIBC_") and name != NEW_VERSION and _newer_than_host(name):
                        raise ClaimgridError(f"needs {name.decode()}, newer than this machine's glibc")
                if not vn_next:
                    break
                off += vn_next
    return renamed


def needs(data: bytes | bytearray) -> tuple[set[str], set[str]]:
    """What an ELF64 library asks of others: its undefined dynamic symbols' names and the
    symbol versions it requires (``.gnu.version_r``)."""
    shoff, shentsize, shnum = struct.unpack_from("<Q", data, 0x28)[0], *struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        sections.append(
            (
                struct.unpack_from("<I", data, off + 4)[0],
                *struct.unpack_from("<QQ", data, off + 0x18),
                struct.unpack_from("<I", data, off + 0x28)[0],
                struct.unpack_from("<Q", data, off + 0x38)[0],
            )
        )
    symbols, versions = set(), set()
    for sh_type, sh_offset, sh_size, sh_link, sh_entsize in sections:
        strtab = sections[sh_link][1]
        if sh_type == SHT_DYNSYM:
            for off in range(sh_offset, sh_offset + sh_size, sh_entsize or 24):
                if struct.unpack_from("<H", data, off + 6)[0] == 0:
                    symbols.add(_cstr(data, strtab + struct.unpack_from("<I", data, off)[0]).decode())
        elif sh_type == SHT_VERNEED:
            off = sh_offset
            while True:
                vn_cnt, _file, vn_aux, vn_next = struct.unpack_from("<HIII", data, off + 2)
                aux = off + vn_aux
                for _ in range(vn_cnt):
                    versions.add(_cstr(data, strtab + struct.unpack_from("<I", data, aux + 8)[0]).decode())
                    aux += struct.unpack_from("<I", data, aux + 12)[0]
                if not vn_next:
                    break
                off += vn_next
    symbols.discard("")
    return symbols, versions


def _newer_than_host(version: bytes) -> bool:
    nums = version.decode().removeprefix("GLIBC_").split(".")
    want = (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0)
    return want > glibc_version()


def library_dir(package_dir: Path, cache_root: Path) -> Path:
    """The folder whose ``libllama.so`` loads here: ``package_dir`` itself on glibc >= 2.38,
    else a cache copy with the edit above (made once, atomically). ClaimgridError (one line)
    when the libraries cannot be made to load."""
    libs = sorted(p for p in package_dir.iterdir() if p.name.startswith("lib") and ".so" in p.name)
    if glibc_version() >= (2, 38) or not libs:
        return package_dir
    digest = hashlib.sha256()
    for p in libs:
        digest.update(p.name.encode() + b"\0" + p.read_bytes())
    dest = cache_root / f"native-{digest.hexdigest()[:16]}"
    if (dest / "libllama.so").exists():
        return dest
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".native-", dir=cache_root))
    try:
        for p in libs:
            data = bytearray(p.read_bytes())
            try:
                patch_library(data)
            except ClaimgridError as exc:
                raise ClaimgridError(f"{p}: the local model's engine cannot load on this machine: {exc}") from None
            (tmp / p.name).write_bytes(bytes(data))
        try:
            tmp.rename(dest)
        except OSError:  # another process made it first
            if not (dest / "libllama.so").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
