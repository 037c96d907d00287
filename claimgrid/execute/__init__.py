"""Running a grid's cells: the typed grid shapes (``spec``: what defines a grid, how this
invocation runs it, a cell's result, meta.json), the one public ``engine.execute``, the plan
(``cells``), the scheduler's admission gate (``admission``), spend records (``spending``), one
machine's gateway + warm parents + verifier (``node``), one cell end to end (``runner``), the
run token kept out of what a run stores (``redact``) and the Ray backend (``ray``). Every backend hands each finished run's record and evidence back
to the driver, the ledger's single writer."""
