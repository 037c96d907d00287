"""The guard: the bubblewrap sandbox every agent command and every verifier test run uses
(``guard``: detection, the command line, the limits)."""
