"""What the driver and the adapters share, stdlib only: one package, imported by both sides.

An adapter process has ``frameworks/_harness`` on its path and imports it as
``harness_shared``; the driver (the project root on its path) imports the same files as
``frameworks._harness.harness_shared``. Its modules import each other relatively, so one copy
serves both names: the probe and fault kinds (``probe_kinds``), the control message's shape
(``harness_control``) and the one way a file an agent could have replaced is read back
(``readback``). Nothing here imports ``claimgrid``: an adapter's venv has none.
"""
