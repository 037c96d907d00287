"""The guard: the bubblewrap sandbox every agent command and every verifier test run uses
(``guard``: detection, the command line, the limits).

Modules:

* ``guard`` - The guard: bubblewrap sandboxes for everything the agent wrote or runs;
* ``keyfilter`` - The sandbox's seccomp filter: no process in a sandbox creates, finds or reads a
  kernel key;
* ``loopback`` - The loopback forwarder: a guarded coding agent's one way out, to the gateway's Unix
  socket;
* ``sameview`` - The same uid and paths in every verifier test run: what the verify cache needs to
  be sound;
* ``slots`` - Per-run resource boxes: process, pid and memory limits one run cannot exhaust for
  another.
"""
