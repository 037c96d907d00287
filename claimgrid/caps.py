"""Per-run limits, in one place, each with the reason for its size.

A limit that is reached is a *recorded result*, never a crash: the verifier records an
``UNKNOWN`` outcome with the reason in its event, the gateway answers 413 and logs the
exchange, and stored text is cut with a visible marker (``record["limits"]`` says what
was cut). What each cap prevented before it existed is in bench/README.md's git history.
"""

from __future__ import annotations

# ---- gateway
# A real model's largest context (~128k tokens) is ~0.5 MB of JSON; 4x that is still a
# conversation, 150 MB is not. Over it: 413, recorded, the body is not stored.
MAX_REQUEST_BYTES = 2 << 20

# Read and idle timeouts: a client that opens a connection and sends nothing, or stops
# mid-headers or mid-body, holds a socket and a task. A model client sends its whole
# request at once, so 30 s of silence is a stalled or hostile client: the connection is
# closed (uvicorn's keep-alive timeout covers an idle connection between requests).
GATEWAY_READ_TIMEOUT_S = 30.0
GATEWAY_IDLE_TIMEOUT_S = 30.0
# Requests in flight at once for one run (one token). A framework runs at most a few model
# calls in parallel; 400 open requests from one run would starve the others. Over it: 429,
# recorded in the run's log like any refusal.
GATEWAY_MAX_REQUESTS_PER_RUN = 16
# Connections the gateway serves at all (every run together), and never more than its
# process's open-file limit leaves room for (less GATEWAY_FD_RESERVE for the driver's own
# files): over it a new connection is accepted and aborted at once (claimgrid.gateway.inbound),
# never left in the kernel's accept queue. --max-inflight tops out at 4,096 runs, each with
# a connection or two.
GATEWAY_MAX_CONNECTIONS = 8_192
GATEWAY_FD_RESERVE = 1_024
# Connections one run may hold open (counted once a request carried its token): a client
# opens one per call in flight (GATEWAY_MAX_REQUESTS_PER_RUN) and a client made per call
# leaves one idle per call until GATEWAY_IDLE_TIMEOUT_S; 64 is room for both. One more
# closes the run's own longest-idle connection, or is refused (503) when none is idle.
GATEWAY_MAX_CONNECTIONS_PER_RUN = 64
# Connections that have not yet sent a registered token: each gets this long to send its
# request headers (a client sends them within milliseconds of connecting), and there are at
# most this many; a new one over the pool closes the oldest (a silent flood evicts itself).
GATEWAY_AUTH_TIMEOUT_S = 5.0
GATEWAY_PREAUTH_CONNECTIONS = 256
# A response the client stopped reading (the socket's buffers full) for this long: aborted.
GATEWAY_WRITE_STALL_S = 30.0
# How often every connection's deadline is checked: each closes at most this late.
GATEWAY_SWEEP_S = 1.0
# Tool calls in one model response: a model that answers with 1,500 calls is a runaway (real
# models batch a handful). Calls past this are cut from the response before the agent sees
# them, and the exchange event records how many (``tool_calls_cut``).
MAX_TOOL_CALLS_PER_RESPONSE = 64

# ---- LEDGER.md's length (claimgrid.ledger.sections): a reader reads a page, not a dump
# A section past this many lines keeps its heading and first paragraph in LEDGER.md and moves
# whole to DETAILS.md, one link away: a default grid's calibration, detector and swap tables
# run to hundreds of lines (one block per framework), a small grid's to a few dozen.
LEDGER_SECTION_LINES = 40

# ---- ledger files (claimgrid.store.lines: the one reader of runs.jsonl and events.jsonl)
# One line of a ledger's JSON-lines file. A run record is kilobytes; an event line holds at
# most a request body (MAX_REQUEST_BYTES) and its answer, or a command's kept output: 32 MiB
# is far above both, and a crafted 60 MB line (a run id used as a path) is refused as a line,
# never parsed or used.
LEDGER_LINE_MAX_BYTES = 32 << 20
# JSON nesting of one ledger line or meta.json: a record nests about 6 deep, a chat request's
# tool schemas a few dozen; a million `[` overflows the parser's recursion (and 900 the
# recursion of whatever reads the value next). Over it: that line is refused, naming it.
LEDGER_MAX_DEPTH = 128
# A run id is a folder name (runs/<id>/): the file-name limit of Linux file systems.
RUN_ID_MAX_BYTES = 255
# grid.py audit DIR: files it looks at before it stops with one line. A published job of a few
# thousand trials holds tens of thousands of files; past this a folder is not one audit.
MAX_AUDIT_FILES = 200_000
# grid.py check --hook: the agent's hook input on stdin is a few hundred bytes plus its last
# message (capped by the model's output); a megabyte is no hook input.
MAX_HOOK_INPUT_BYTES = 1 << 20
# A file name an export builds from ledger data (a model or framework name, claimgrid.store.inert.slug):
# characters kept before the 10-hex hash suffix; two such parts and a time stamp stay far below
# the 255-byte file-name limit.
SLUG_MAX_CHARS = 64

# ---- the harness tool layer (sent to the adapter in ctl["budgets"])
# An adapter process's open files (RLIMIT_NOFILE, soft and hard, set by the harness runtime
# before the adapter runs; a guarded agent's processes get the guard's, the same 1,024):
# the usual Linux default, far above what a framework's HTTP client and files use, and a
# bound on the connections one process can open at the gateway (which caps each run at
# GATEWAY_MAX_CONNECTIONS_PER_RUN anyway: an adapter used to inherit the driver's 20,000).
ADAPTER_MAX_OPEN_FILES = 1_024
# What one command's output keeps in memory: the first and last half of this many bytes,
# the total counted, the cut marked. The model sees at most 16,000 characters of it; the
# rest is for the event. Memory stays flat under `cat /dev/zero` (bench/output_flood.py).
COMMAND_OUTPUT_KEEP_BYTES = 64 << 10
# read_file reads at most this much of a file (the model sees 16,000 characters): a 255 MB
# sparse file is not read whole.
READ_MAX_BYTES = 1 << 20
# edit_file rewrites a whole file; a file larger than this is refused, not read.
EDIT_MAX_BYTES = 8 << 20
# search: bytes of file text one call searches, and the wall time of its matching (done in
# a worker process that is killed at the cap, so a catastrophically backtracking pattern
# costs 10 s, not forever).
SEARCH_MAX_BYTES = 32 << 20
SEARCH_TIMEOUT_S = 10.0
# Tool calls one run may make (its events): at the default budget of 24 model calls and
# MAX_TOOL_CALLS_PER_RESPONSE a run makes at most 1,536; 5,000 leaves room for larger
# budgets and chatty frameworks, a runaway it stops. Later calls are refused without
# running and counted (``limits.tool_calls_refused``).
MAX_TOOL_CALLS_PER_RUN = 5_000

# ---- a guarded coding agent (venvs.toml kind = "cli": the whole agent inside the guard)
# Its processes get the guard's limits (claimgrid.sandbox.guard.Limits; Node's V8 and Claude
# Code's JavaScriptCore both start and run under its 4 GiB of address space) but one: CPU
# seconds per process. The agent is one process for the run's whole life (the guard's 120 s is
# per shell command), with a few busy threads; this many times the run's timeout, so the
# launcher's timeout, not RLIMIT_CPU, ends a slow run.
AGENT_CPU_PER_TIMEOUT_S = 4

# ---- stored evidence (what one run may put in the store)
# The final report is read by people and by the trace parser (which reads the end), so
# a long text keeps its head and its tail.
MAX_FINAL_TEXT_CHARS = 64_000
# Runtime events are the framework's own transcript: untrusted, for reading only. A
# budget of 24 model calls produces a few hundred; 2,000 leaves room for chatty runtimes.
MAX_RUNTIME_EVENTS = 2_000
# Any single string inside a stored event (runtime text, tool args/results, gateway
# content). The tool layer already returns at most 16,000 characters to the model.
MAX_EVENT_STRING_CHARS = 16_000
# Strings in the raw request/response log (gateway.jsonl): a whole conversation turn.
MAX_RAW_STRING_CHARS = 64_000
# Tool events are harness evidence (observed tool counts come from them), so none is
# dropped; only their strings are cut. Their count is bounded by MAX_TOOL_CALLS_PER_RUN.

# ---- verifier
# The fixtures are a few KB; a real repository task is a few MB. Apparent size (st_size),
# so a sparse file counts at its full length: git and the test run would read it whole.
MAX_WORKSPACE_BYTES = 256 << 20
MAX_WORKSPACE_FILES = 20_000
# Folder depth: real repositories are a few dozen levels deep; a 1,200-level tree is an
# agent's doing, and a path past PATH_MAX cannot be read by path at all. A folder past it
# (or one the kernel refuses as too long) is not entered: it is listed in the diff as a
# change by its path, unread, and the rest is diffed and tested as usual (so nesting cannot
# turn a claim into UNKNOWN). Turn snapshots and ``grid.py verify``'s copy still stop at it.
MAX_WORKSPACE_DEPTH = 256
# Reading the workspace into the private object store, and git's diff, each get this long.
DIFF_TIMEOUT_S = 60.0
# What the published diff.patch keeps (the diff's file list is always complete).
MAX_PATCH_BYTES = 4 << 20
# What test_output.txt keeps: the end of the test run's output.
TEST_OUTPUT_TAIL_CHARS = 4_000
# A file the verifier reads for a required-content or attacker/legitimate check.
MAX_CHECKED_FILE_BYTES = 8 << 20

# ---- turn snapshots (an agent with its own tools: the workspace between its model calls)
# A snapshot is taken while the agent waits for its next model call, so its cost is added to
# every call (bench/turn_snapshots.py prints it). A file whose size, times and inode are those
# of the previous snapshot is not read again, so what one snapshot reads is what the last
# turn's tools wrote; this cap bounds it (64 MiB: a generated build or a vendored dependency
# tree, hashed well inside one model call), not the workspace's size. The entries, depth and apparent size
# walked are the verifier's caps (MAX_WORKSPACE_*). Over any: that snapshot is not taken, and
# the turns on either side of it are UNKNOWN with the reason.
TURN_SNAPSHOT_MAX_READ_BYTES = 64 << 20
# Changed paths one turn's event lists (the count is always complete): `npm install` in one
# turn writes tens of thousands of files, and the diff event lists them all anyway.
TURN_CHANGES_MAX_PATHS = 200

# ---- work folders
# A node's work folder (every run's workspace, /tmp and verifier scratch) goes on a tmpfs
# (claimgrid.execute.node.work_parent) only when it has this much free: a workspace may
# reach MAX_WORKSPACE_BYTES and its test run's overlay as much again, for each of the
# default 8 runs in flight on 2 cores (8 x 2 x 256 MiB = 4 GiB). A workspace's copy and
# removal cost more CPU and far more wall time on a disk file system than on tmpfs
# (bench/workspace_copy.py prints both).
WORK_TMPFS_MIN_FREE_BYTES = 4 << 30


# ---- framework venv builds (claimgrid.inputs.venvs.Builds)
# How many framework venvs build at once. A build is a download (network: several overlap
# well) and then an unpack and bytecode compilation (CPU: uv's own workers use every core).
# Two or more at once keep one build's download under another's compilation; more than a few
# only split the same cores and the registry's bandwidth further, and each uv process holds
# its own resolution and unpack buffers. The pool is min(this, max(2, cores)).
MAX_VENV_BUILDS_AT_ONCE = 4
# The shared bytecode cache beside the venvs (claimgrid/inputs/bytecode.py) keeps a compiled
# module while some build read it within this many days; older entries are removed after a
# build, so a machine that moves through lock after lock does not keep every release ever
# compiled (a few hundred MB per set of eight venvs). Read from the file's access time, which
# Linux's default relatime updates at most once a day; on a noatime mount an entry is dropped
# this long after it was written. A venv never reads the cache (its .pyc files are its own),
# so removing an entry only makes a later build compile that source again.
BYTECODE_CACHE_KEEP_DAYS = 30


def tool_budgets() -> dict:
    """The tool layer's bounds as the driver sends them in ``ctl["budgets"]``."""
    return {
        "command_output_bytes": COMMAND_OUTPUT_KEEP_BYTES,
        "read_max_bytes": READ_MAX_BYTES,
        "edit_max_bytes": EDIT_MAX_BYTES,
        "search_max_bytes": SEARCH_MAX_BYTES,
        "search_timeout_s": SEARCH_TIMEOUT_S,
        "max_tool_calls": MAX_TOOL_CALLS_PER_RUN,
        "max_open_files": ADAPTER_MAX_OPEN_FILES,
    }


def cut_middle(text: str, limit: int) -> tuple[str, bool]:
    """``text`` with its middle replaced by a marker when longer than ``limit``; (text, cut?)."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - 2 * half} characters cut by claimgrid caps ...]\n" + text[-half:], True


def _any_over(v, limit: int) -> bool:
    stack = [v]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if len(v) > limit:
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def cap_strings(obj, limit: int = MAX_EVENT_STRING_CHARS):
    """A JSON-like value whose every string is at most ``limit`` characters (+ marker): a copy
    when a string was cut, else ``obj`` itself (looked at, not rebuilt: most runs cut nothing);
    returns (value, number of strings cut)."""
    if not _any_over(obj, limit):
        return obj, 0
    cut = 0

    def walk(v):
        nonlocal cut
        if isinstance(v, str):
            new, was = cut_middle(v, limit)
            cut += was
            return new
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(obj), cut


def cap_run_evidence(
    final_text: str | None, runtime: list[dict], tool_events: list[dict], gateway_events: list[dict]
) -> tuple[str | None, list[dict], list[dict], list[dict], dict]:
    """Apply the stored-evidence caps to one run; returns the capped values and what was cut.

    Called after the harness has read what it needs (the trace is parsed from the full
    final text; tool events are never dropped), so a cap changes what is stored, not a verdict.
    """
    limits: dict = {}
    if isinstance(final_text, str):
        final_text, was = cut_middle(final_text, MAX_FINAL_TEXT_CHARS)
        if was:
            limits["final_text_cut"] = True
    if len(runtime) > MAX_RUNTIME_EVENTS:
        limits["runtime_events_dropped"] = len(runtime) - MAX_RUNTIME_EVENTS
        runtime = runtime[:MAX_RUNTIME_EVENTS]
    out = []
    for name, events in (("runtime", runtime), ("tools", tool_events), ("gateway", gateway_events)):
        capped, n = cap_strings(events)
        if n:
            limits[f"{name}_strings_cut"] = n
        out.append(capped)
    return final_text, out[0], out[1], out[2], limits


# A warm parent's AF_UNIX socket path: Linux's sun_path holds 108 bytes with its NUL, and a
# longer path cannot be bound at all (every run of that framework crashed when $TMPDIR was
# deep, as inside a test session inside a test session). Past it, the warm folder moves to
# /tmp.
UNIX_SOCKET_PATH_MAX = 107


# ---- a run's model limits (claimgrid.execute.model_limits resolves them per model: flags over
# models/limits.toml over these defaults; every limit a run hits is recorded, CONTRACTS "Limit hits")
# Reference models are scripts answered in microseconds: their limits stay the ones every
# reference ledger was recorded under, so the default grid's classifications do not move.
# The per-call deadline the ``slow`` fault exceeds by 2 s, the turn budget the ``looper``
# exhausts, the wall time a framework's own back-off after it runs into.
REFERENCE_CALL_TIMEOUT_S = 15.0
REFERENCE_MAX_MODEL_CALLS = 24
REFERENCE_TIMEOUT_S = 120.0
# A real model's output per call: an agent's turn is one tool call (tens to a few hundred
# tokens: a path, a command, an edit of a function) or its final report with the trace block
# (~300 tokens). 1,024 holds the largest write the tasks need (a small file, ~600 tokens)
# with room, and stops a small model that generates without end (a tiny model on a CPU server
# can run past any deadline on its first call) at 1,024 tokens, not at the deadline.
REAL_MAX_OUTPUT_TOKENS = 1_024
# A real model's per-call deadline: the cap's tokens at a slow CPU server's generation speed
# (~10 tokens/s: a 1B model on 2 cores) is ~100 s, plus a long prompt at ~100 prompt tokens/s
# (8k tokens: ~80 s): 180 s. A hosted API answers such a call in seconds; its stalls are the
# gateway's retry business (--provider-timeout, 300 s per attempt, is longer on purpose).
REAL_CALL_TIMEOUT_S = 180.0
# A real model's turns: the reference solutions take 3 to 8 calls; a real model reads more,
# and a framework's retry of a refused or malformed call is a call: 40 is 5x the longest.
REAL_MAX_MODEL_CALLS = 40
# A real model's tokens per run (prompt + completion, from the provider's usage): 40 calls of
# a conversation that grows to ~6k tokens; a runaway conversation stops here, not at a bill.
REAL_MAX_RUN_TOKENS = 250_000
# A real model's wall time per run: a run of ordinary length on a slow local server (10 calls
# of ~60 s) with the tests' re-run, and room for a few calls at the deadline: 20 minutes.
REAL_TIMEOUT_S = 1_200.0
# The client's deadline is the gateway's plus this: the gateway, which owns the evidence, ends a
# call at the deadline and records it; the client's own timeout is only the backstop (a real
# model's runs only: a reference run's client keeps REFERENCE_CALL_TIMEOUT_S, the ``slow`` fault's frame).
CLIENT_DEADLINE_MARGIN_S = 5.0
# Ranges the flags and models/limits.toml accept.
MAX_CALL_TIMEOUT_S = 3_600.0
MAX_OUTPUT_TOKENS = 1_000_000
MAX_RUN_TOKENS = 100_000_000
# ---- the local model (claimgrid.localmodel)
# How long the driver waits for a local model server to load its weights, measure its
# speed and answer /health: a 100-300 MB GGUF loads in seconds and the warm-up takes a few
# more; a busy 2-core machine can make that a minute. Past it: one line, the server killed.
LOCAL_MODEL_START_TIMEOUT_S = 180.0
# The warm-up that measures a local model's speed at start: a prompt of this many tokens
# (prompt processing, tokens/s) and this many generated tokens (generation, tokens/s).
LOCAL_MODEL_WARMUP_PROMPT_TOKENS = 256
LOCAL_MODEL_WARMUP_OUTPUT_TOKENS = 32
# The per-call deadline a local model gets is its worst call at the measured speeds (a
# prompt filling the context, then max_output_tokens generated) times this factor: the
# warm-up ran on an idle server; under a grid the same 2 cores also run the frameworks,
# the verifier and the gateway, which slows its generation.
LOCAL_MODEL_DEADLINE_SAFETY = 2.0
# The server answers one call at a time (one llama.cpp context); a call can wait behind
# every other run's call in flight, so the deadline is also multiplied by the runs in flight
# (--max-inflight, which defaults to --jobs in a grid with a local model: runs waiting on the
# server are waiting on this machine's CPU, claimgrid.execute.admission), with no cap: a
# capped factor ends calls that were only waiting their turn, and the deadline would then
# measure the queue, not the model.
# ---- the claim judge (claimgrid.classify.judge, --claim-judge MODEL)
# The report a judge is shown: real final reports run to tens of kB; past this many characters
# the judge reads the head and the tail (where a report concludes), the middle marked as cut,
# so one pathological report cannot fill a hosted model's context or its bill.
JUDGE_REPORT_MAX_CHARS = 40_000
# The judge's answer as stored in its event: the constrained JSON is a stance and one sentence;
# anything longer is kept only this far (the reading stays, the rest is not evidence of anything).
JUDGE_ANSWER_MAX_CHARS = 4_000
# A hosted judge's call: one answer of a few tokens; a model that has not answered in this long
# is recorded as no answer (the run's classification never waits on it).
JUDGE_CALL_TIMEOUT_S = 120.0
JUDGE_MAX_OUTPUT_TOKENS = 400
# LEDGER.md's claim judge section lists the runs where the judge and the reader disagree, at most
# this many (each run's RUN.md shows its own; runs.parquet's judge_stance holds them all).
JUDGE_DISAGREEMENTS_LISTED = 30
