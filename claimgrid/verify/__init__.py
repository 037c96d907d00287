"""After an adapter exits: the out-of-process verifier (``verifier``: diff, required files,
scope, canaries, the task's tests re-run in the guard) and its result cache (``cache``)."""
