"""The guard: the bubblewrap sandbox every agent command and every verifier test run uses
(``guard``: detection, the command line, the limits).

Modules:

* ``guard`` - The guard: bubblewrap sandboxes for everything the agent wrote or runs;
* ``keyfilter`` - The sandbox's seccomp filter: no process in a sandbox creates, finds or reads a
  kernel key;
* ``loopback`` - The loopback forwarder: a guarded coding agent's one way out, to the gateway's Unix
  socket;
* ``readback`` - The driver's side of the one read-back helper: ``frameworks/_harness/readback.py``,
  loaded from its file (the adapter side imports no ``claimgrid``, so the code lives there, stdlib
  only, and the driver runs the very same code);
* ``sameview`` - The same uid and paths in every verifier test run: what the verify cache needs to
  be sound;
* ``slots`` - Per-run resource boxes: process, pid and memory limits one run cannot exhaust for
  another.
"""
