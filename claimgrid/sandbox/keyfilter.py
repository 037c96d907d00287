"""The sandbox's seccomp filter: no process in a sandbox creates, finds or reads a kernel key.

Why: the kernel's key rings are per uid, not per namespace. A run's uid is leased
(:mod:`claimgrid.sandbox.slots`) and leased again by a later run, of this grid or the next
one, and the verifier's test run of a run uses that run's uid: a key one of them stores in its
user or user-session ring (``add_key``), or the uid's persistent ring (``keyctl``), is there
for every later holder of the uid to read. So every sandbox denies the three system calls of
the key API, ``add_key``, ``request_key`` and ``keyctl``, with ``EPERM``; nothing else is
filtered. ``/proc/keys`` and ``/proc/key-users`` (what keys exist, whose) are seen empty
(:data:`MASKED_PROC`).

How: a classic BPF program (``struct sock_filter``, built here in pure Python: no
libseccomp), handed to bwrap by ``--seccomp FD``; bwrap installs it (with ``no_new_privs``)
just before the command starts, so the command and everything it starts carry it. The
program checks the system-call ABI (``seccomp_data.arch``) first, since each ABI numbers its
calls differently: every ABI the host's kernel runs (x86-64 with x32, and i386; AArch64 and
32-bit ARM) has its three numbers denied, and a call in any other ABI is denied whatever it
is. :data:`ABIS` is the table; on a machine it does not know, there is no filter and the
guard's facts say so.

The argv stays a plain list (the adapter runs a coding agent's ``argv_prefix`` from its
control JSON): :func:`argv_prefix` is a ``bash`` prefix that opens a pipe on a free
descriptor, writes the program into it and execs bwrap with ``--seccomp`` naming that
descriptor; bwrap reads it whole and closes it before the command starts.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; ...
_NR, _ARCH = 0, 4
# Classic BPF opcodes (linux/filter.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
RET_EPERM = RET_ERRNO | errno.EPERM

# The key API's calls (add_key, request_key, keyctl) in each ABI a host's kernel runs, by the
# host's machine name: (ABI name, AUDIT_ARCH_* value, numbers). x32 calls arrive as x86-64
# ones with bit 30 (__X32_SYSCALL_BIT) set.
_X32 = 0x40000000
ABIS: dict[str, tuple[tuple[str, int, tuple[int, ...]], ...]] = {
    "x86_64": (
        ("x86-64", 0xC000003E, (248, 249, 250, _X32 | 248, _X32 | 249, _X32 | 250)),
        ("i386", 0x40000003, (286, 287, 288)),
    ),
    "aarch64": (
        ("aarch64", 0xC00000B7, (217, 218, 219)),
        ("arm", 0x40000028, (309, 310, 311)),
    ),
}
# Files of the sandbox's /proc that list keys and their owners: bound to an empty file.
MASKED_PROC = ("/proc/keys", "/proc/key-users")


def abis(machine: str | None = None) -> tuple[tuple[str, int, tuple[int, ...]], ...] | None:
    """The ABIs to filter on ``machine`` (``platform.machine()``), None when it is not known."""
    return ABIS.get(machine if machine is not None else platform.machine())


def program(machine: str | None = None) -> bytes | None:
    """The filter's BPF program, ``struct sock_filter[]`` in the host's byte order (module
    docstring); None on a machine :data:`ABIS` does not know."""
    table = abis(machine)
    if table is None:
        return None
    # (code, jt, jf, k) with jt/jf either an offset or a label resolved below.
    ops: list[tuple[int | str, int | str, int | str, int]] = [(_LD_W_ABS, 0, 0, _ARCH)]
    for i, (_, arch, numbers) in enumerate(table):
        ops.append((_JEQ_K, 0, f"arch{i + 1}", arch))
        ops.append((_LD_W_ABS, 0, 0, _NR))
        ops += [(_JEQ_K, "deny", 0, nr) for nr in numbers]
        ops.append((_RET_K, 0, 0, RET_ALLOW))
        ops.append(("label", f"arch{i + 1}", 0, 0))
    ops.append((_RET_K, 0, 0, RET_EPERM))  # a call in an ABI not in the table
    ops.append(("label", "deny", 0, 0))
    ops.append((_RET_K, 0, 0, RET_EPERM))
    labels: dict[int | str, int] = {}
    real: list[tuple[int, int | str, int | str, int]] = []
    for code, jt, jf, k in ops:
        if isinstance(code, str):  # a label: its name in the jt place
            labels[jt] = len(real)
        else:
            real.append((code, jt, jf, k))
    out = []
    for at, (code, jt, jf, k) in enumerate(real):
        offsets = []
        for jump in (jt, jf):
            offset = labels[jump] - at - 1 if isinstance(jump, str) else jump
            assert 0 <= offset <= 255, "a BPF jump reaches at most 255 instructions ahead"
            offsets.append(offset)
        out.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
    return b"".join(out)


def evaluate(prog: bytes, nr: int, arch: int) -> int:
    """What ``prog`` returns for a call ``nr`` in ABI ``arch``: a classic-BPF interpreter for
    the instructions :func:`program` emits (what the tests check the program with)."""
    data = struct.pack("=iI", nr, arch)
    ops = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == _LD_W_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code == _JEQ_K:
            pc += 1 + (jt if acc == k else jf)
        elif code == _RET_K:
            return k
        else:
            raise ValueError(f"opcode {code:#x} is not one program() emits")


def argv_prefix(prog: bytes) -> list[str]:
    """``[bash, -c, script, program]``: put before ``[bwrap, args...]``, it execs bwrap with
    ``--seccomp N``, N a free descriptor holding ``prog`` (a pipe ``printf`` writes; bash
    picks N, so it never clashes with a descriptor the caller passes on)."""
    escaped = "".join(f"\\{b:03o}" for b in prog)  # printf's format: octal escapes only
    script = 'exec {f}< <(printf "$0") && bwrap="$1" && shift && exec "$bwrap" --seccomp "$f" "$@"'
    return ["/bin/bash", "-c", script, escaped]
