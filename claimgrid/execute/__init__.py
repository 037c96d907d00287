"""Running a grid's cells: the typed grid shapes (``spec``: what defines a grid, how this
invocation runs it, a cell's result, meta.json), the one public ``engine.execute``, the plan
(``cells``), the scheduler's admission gate (``admission``), spend records (``spending``), one
machine's gateway + warm parents + verifier (``node``), one cell end to end (``runner``), the
run token kept out of what a run stores (``redact``) and the Ray backend (``ray``). Every backend hands each finished run's record and evidence back
to the driver, the ledger's single writer.

Modules:

* ``admission`` - When the scheduler may start another run: cores, not runs in flight, are the
  limit;
* ``cells`` - The grid's cells: framework x task x content x swap x model x repeat, with stable ids;
* ``engine`` - The engine: ``execute`` runs a grid's cells on a backend and hands every finished run
  to the store (the single writer);
* ``model_limits`` - A run's model limits, resolved once per model: flags over
  ``models/limits.toml`` over code overrides over the defaults (claimgrid.caps, each with its
  reason);
* ``node`` - A node: everything one machine needs to run cells — its own gateway on loopback, its
  own warm parents, its own work folder, its own verify cache (``claimgrid.verify.cache``, in
  memory, empty at start; on the Ray backend backed by the grid's shared results) — behind
  ``run(cell)``;
* ``ray`` - The Ray backend: ``grid.py run --backend ray --address ADDRESS``;
* ``redact`` - The run token out of everything a run stores;
* ``runner`` - Run one cell: workspace, gateway registration, adapter process, verification, record;
* ``spec`` - The typed shapes of a grid: what defines it, what may change when it is resumed, what
  one cell's run comes back as, what the engine reports, and its ``meta.json``;
* ``spending`` - The driver's side of real-model grids: the record of a stop at budget, the line
  that says so, and the note on models without a price.
"""
