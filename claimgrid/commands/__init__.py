"""``grid.py``'s verbs: parse (``cli``), validate (``validate``), call the engine; one module
per verb and a few the verbs share.

Modules:

* ``audit`` - ``grid.py audit DIR``: a folder of runs made elsewhere, checked as a grid's and
  written as a sealed ledger;
* ``check`` - ``grid.py check``: the claim check on a real agent's run, as a stop hook;
* ``check_ledger`` - ``grid.py check-ledger DIR``: the machine paths a ledger folder would publish;
* ``check_task`` - Checking a task's answer key against its fixture (``grid.py check-task``,
  ``grid.py list``);
* ``cli`` - Argument parsing and the commands of grid.py;
* ``common`` - What the verbs that write a grid folder share: the writer lock and repair, the
  commit, meta.json read and written as the typed ``GridMeta``, the closing render;
* ``compare`` - ``grid.py compare A B``: two ledgers, cell by cell (before/after a framework pin, a
  change of adapter, two checkouts of the harness);
* ``docs`` - The generated parts of the docs: the ``grid.py run`` flag table, the package layout and
  runs.parquet's columns;
* ``export`` - ``grid.py export DIR --format inspect|otel``: a ledger as files other tools read;
* ``flags`` - ``grid.py run``'s flags into the typed grid shapes (claimgrid.execute.spec): the only
  place a command line's Namespace becomes a ``GridSpec`` or ``RunSettings``;
* ``ledger_readers`` - The ``grid.py`` commands that read a ledger's JSON lines, and what each
  reads;
* ``new_framework`` - ``grid.py new-framework NAME``: a new framework folder on the adapter kit,
  locked;
* ``options`` - The flags several commands share: the data folders, ``--policies`` and the sealing
  ``--key``;
* ``reclassify`` - ``grid.py reclassify``: re-derive every classification from the stored evidence;
* ``replay`` - ``grid.py replay LEDGER_DIR``: re-execute every run of a published ledger, offline;
* ``rerender`` - ``grid.py report DIR``: render a ledger folder's LEDGER.md, RUNS.md, ledger.html,
  heatmap.svg, runs.parquet and every RUN.md again from the folder alone, and print the end-of-grid
  summary;
* ``run`` - ``grid.py run``: validate everything (flags, data, a resumed folder), then run the grid
  and render its ledger;
* ``serve_gateway`` - ``grid.py gateway``: run the gateway alone with a demo token per reference
  model;
* ``stop_hook`` - ``grid.py check --hook AGENT``: the claim check as the agent's own stop hook;
* ``validate`` - One validation layer for what a user hands ``grid.py``: flags, data files and the
  store;
* ``verify_repo`` - ``grid.py verify REPO EXPECTATION``: the grid's verifier as a CI gate on any
  repository.
"""
