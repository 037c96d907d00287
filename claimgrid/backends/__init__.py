"""Where cells run. ``local`` (the default, in ``claimgrid.grid``): one node in the driver's
process. ``ray``: one node per Ray node (``claimgrid.backends.ray``). Every backend hands each
finished run's record and evidence back to the driver, the ledger's single writer."""
