"""Running a grid's cells: the plan (``cells``), the scheduler's admission gate
(``admission``), spend limits (``spending``), one machine's gateway + warm parents +
verifier (``node``), one cell end to end (``runner``) and the Ray backend (``ray``). Every
backend hands each finished run's record and evidence back to the driver, the ledger's
single writer."""
