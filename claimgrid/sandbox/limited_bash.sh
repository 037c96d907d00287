#!/usr/bin/bash
# The agent sandbox's `bash`, first on its PATH (claimgrid.launch.confine.agent_sandbox binds it
# read-only at /opt/claimgrid/bin/bash): a coding agent that finds its shell on PATH (Codex CLI
# does, for a uid with no passwd entry) runs each command under a wall-time limit, the run's
# CLAIMGRID_COMMAND_TIMEOUT_S (set by the guard), killed 5 s after its SIGTERM; exit 124 then.
exec /usr/bin/timeout --kill-after=5 "${CLAIMGRID_COMMAND_TIMEOUT_S:-30}" /usr/bin/bash "$@"
