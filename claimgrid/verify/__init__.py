"""After an adapter exits: the out-of-process verifier (``verifier``: diff, required files,
scope, canaries, the task's tests re-run in the guard) and its result cache (``cache``).

Modules:

* ``cache`` - A content-addressed cache of the verifier's test runs;
* ``childboot`` - The harness's side of a test process: the bootstrap run as ``python [-I] -c
  SOURCE`` in front of the task's own ``-m unittest|pytest`` arguments (see
  :mod:`claimgrid.verify.tamper`);
* ``snapshots`` - Turn snapshots: the workspace of an agent with its own tools, between its model
  calls;
* ``tamper`` - Tamper-evident test runs: what the verifier adds so the code under test cannot talk
  its test run into a pass;
* ``verifier`` - The out-of-process verifier: what the harness itself finds after the agent has
  exited;
* ``workspace`` - The safe workspace reader: walk an agent's workspace and read its files without
  following a symlink out of it and without a check-then-open race.
"""
