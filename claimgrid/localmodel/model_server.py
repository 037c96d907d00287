"""The local model server: one GGUF served as OpenAI chat completions on 127.0.0.1.

Run only as its own process (``python -m claimgrid.localmodel.model_server CONFIG_JSON``, started
by :mod:`claimgrid.localmodel.lifecycle`): the driver never loads a model. It

* dies with its parent: ``PR_SET_PDEATHSIG`` (SIGKILL when the driver's thread that
  started it ends, the driver killed by SIGKILL included), and a thread that reads its
  stdin, a pipe only the driver holds, and exits the process on EOF (the driver gone by
  any means);
* answers only its driver's gateway: the pipe's first line is the server's key (never on a
  command line or in an environment, which other processes of the machine may read), and
  every request but ``GET /health`` must carry it as ``Authorization: Bearer KEY``, as
  llama.cpp's ``llama-server --api-key`` asks; any other is a 401 (the gateway's LiteLLM
  deployment holds the key: claimgrid.gateway.providers.register_local). No error answer
  quotes the request;
* loads the engine (``llama-cpp-py-sync``'s prebuilt llama.cpp, :mod:`.native`) and the
  weights (:mod:`.weights`), checks the chat template, measures its speed with a warm-up
  (prompt processing and generation, tokens/s; ``claimgrid.caps``), binds a free port on
  127.0.0.1 and prints one JSON line on stdout: ``{"port", "provenance"}`` (or
  ``{"error"}`` and exit 2), then serves.

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (non-streaming,
and ``"stream": true`` as Server-Sent Events of the finished answer: the gateway's upstream
call does not stream, a client that asks still gets the OpenAI event shape). Calls are
answered one at a time (one llama.cpp context); the tokens a call shares with a recent
call's prompt are reused from the KV cache (``SLOTS`` conversations kept), as llama.cpp's own
server reuses its slots' prompts.

Per call: ``max_tokens`` (or ``max_completion_tokens``) capped at the entry's
``max_output_tokens`` and at what the context has left; ``temperature`` and ``top_p`` as the
request gives them (else the entry's temperature, top_p 0.95), top_k 40, min_p 0.05, no
repeat penalty; the sampler seed is the request's ``seed``, else the entry's seed plus the
call's index on this server (calls differ, a server's sequence is reproducible).
``usage`` is counted by the model's tokenizer: prompt tokens as templated, completion tokens
as sampled. Tools: :mod:`.toolcalls` (the documented rule); ``content`` is the raw text.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

from claimgrid.caps import LOCAL_MODEL_WARMUP_OUTPUT_TOKENS, LOCAL_MODEL_WARMUP_PROMPT_TOKENS
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel import glibc_compat, toolcalls, weights
from claimgrid.localmodel.catalog import GGUF_TEMPLATE, LocalModel

ENGINE = "llama-cpp-py-sync"
# KV-cache slots: the prompts of this many recent conversations are kept, so a run's next
# call (and another run of the same framework and task, whose prompt differs only near its
# end) evaluates only its new tokens. Memory: SLOTS x context x the model's KV bytes per token
# (SmolLM2-135M: ~23 KB, so ~1 GB). 10: the grid plans a cell's frameworks next to each other
# (claimgrid.execute.cells), so with the default matrix's 8 library frameworks plus 2 runs in
# flight each framework's prompt is still cached when its next cell comes; with 4 slots the
# least recently used one was always another framework's and every run's prompt was evaluated
# whole (~900 tokens at ~36 tokens/s on a loaded 2-core machine: ~25 s of a ~30 s first call).
SLOTS = 10
# The share of a slot's cached prompt a new prompt must repeat for that slot to be reused (as
# llama.cpp's server's --slot-prompt-similarity, 0.5 by default). Without it the slot sharing
# the most tokens always won, even when that was only the chat template's first few tokens
# every prompt starts with: every call went to one slot, each framework's prompt evicted the
# last one's, and the other nine slots stayed empty (the CI lane, 2026-12-06: 22 calls, all in
# slot 2; a repeat's prompt evaluated whole, ~6 s instead of ~1 s).
SLOT_SIMILARITY = 0.5
PR_SET_PDEATHSIG = 1
WARMUP_TOUCH_TOKENS = 16  # the warm-up's first, unmeasured pass
# A fixed conversation rendered with the template at start: its sha256 pins what the
# template does to messages (a built-in template's text is code inside llama.cpp).
PROBE = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
    {"role": "user", "content": "V"},
]
WARMUP_TEXT = (
    "The harness records every exchange between the agent and its model, runs the tests "
    "itself and compares what the agent claims with what it observed. "
)


def die_with_parent(parent_pid: int) -> str:
    """PR_SET_PDEATHSIG(SIGKILL), then exit at once if the parent is already gone; read the
    server's key, the first line of stdin (the driver's pipe; none: exit); then a thread exits
    the process when that pipe reaches EOF. Returns the key."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe below still ends the server
    if os.getppid() != parent_pid:
        os._exit(0)
    line = b""
    while not line.endswith(b"\n") and len(line) < 4096:
        byte = os.read(0, 1)  # a byte at a time: nothing after the line is taken from the pipe
        if not byte:
            break
        line += byte
    key = line.decode("ascii", "replace").strip()
    if not key:
        os._exit(0)  # the driver closed the pipe before it gave the key: it is gone

    def lifeline() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=lifeline, name="lifeline", daemon=True).start()
    return key


class Engine:
    """One model and context; :meth:`complete` answers one chat completion (serialised)."""

    def __init__(self, name: str, model: LocalModel, catalog: Path, cache_root: Path):
        import importlib.util

        self.name, self.model = name, model
        path, sha = weights.resolve(name, model, catalog, cache_root)
        spec = importlib.util.find_spec("llama_cpp_py_sync")
        if spec is None or spec.origin is None:
            raise ClaimgridError("the local-model extra is not installed: uv sync --extra local-model")
        package_dir = Path(spec.origin).parent
        lib_dir = glibc_compat.library_dir(package_dir, cache_root)
        import llama_cpp_py_sync._cffi_bindings as bindings

        # The bindings look in their own folder first; on an older glibc the edited copies.
        bindings._find_library = lambda: str(lib_dir / "libllama.so")
        from llama_cpp_py_sync import Llama

        # SLOTS sequences, each with the entry's whole context (llama.cpp splits n_ctx among them).
        self.llm = Llama(
            str(path),
            n_ctx=model.context * SLOTS,
            n_seq_max=SLOTS,
            n_threads=model.threads,
            seed=model.seed,
            verbose=False,
        )
        self.lib, self.ffi = self.llm._lib, self.llm._ffi
        # Only the last token's logits are needed; the bindings turn on embeddings for all.
        self.lib.llama_set_embeddings(self.llm._ctx, False)
        self.template, template_text = self._template(catalog)
        self.lock = threading.Lock()
        self.slots: list[list[int]] = [[] for _ in range(SLOTS)]
        self.used = [0] * SLOTS
        self.calls_served = 0
        self.calls = 0
        manifest = json.loads((package_dir / "native_manifest.json").read_text())
        self.provenance = {
            "name": name,
            "engine": {
                "name": ENGINE,
                "version": metadata.version(ENGINE),
                "llama_cpp_commit": manifest.get("llama_cpp_commit"),
                "native_libraries": "wheel"
                if lib_dir == package_dir
                else "wheel, glibc-2.38 symbols mapped (glibc_compat.py)",
            },
            "weights": {"file": path.name, "sha256": sha, "bytes": path.stat().st_size},
            "template": {
                "name": model.template,
                "sha256": hashlib.sha256(template_text.encode()).hexdigest(),
                "probe_sha256": hashlib.sha256(self.render(PROBE).encode()).hexdigest(),
            },
            "context": model.context,
            "kv_slots": SLOTS,
            "threads": model.threads,
            "seed": model.seed,
            "temperature": model.temperature,
            "max_output_tokens": model.max_output_tokens,
            "sampling": "top_k 40, top_p 0.95 (or the call's), min_p 0.05, no repeat penalty",
            "tool_call_rule": "claimgrid/localmodel/toolcalls.py: <tool_call>{name, arguments}</tool_call> or one bare JSON object",
        }

    def _template(self, catalog: Path) -> tuple[bytes, str]:
        lib, ffi, field = self.lib, self.ffi, f"models.{self.name}.template"
        if self.model.template == GGUF_TEMPLATE:
            ptr = lib.llama_model_chat_template(self.llm._model, ffi.NULL)
            if ptr == ffi.NULL:
                raise ClaimgridError(
                    f"{catalog}: field '{field}': the GGUF has no chat template; name a built-in one "
                    f"({', '.join(self.builtin_templates())})"
                )
            text = ffi.string(ptr).decode("utf-8", "replace")
            return text.encode(), text
        if self.model.template not in self.builtin_templates():
            raise ClaimgridError(
                f"{catalog}: field '{field}': '{self.model.template}' is not a llama.cpp built-in template "
                f"({', '.join(self.builtin_templates())}) nor 'gguf'"
            )
        return self.model.template.encode(), self.model.template

    def builtin_templates(self) -> list[str]:
        n = self.lib.llama_chat_builtin_templates(self.ffi.NULL, 0)
        out = self.ffi.new("const char *[]", n)
        self.lib.llama_chat_builtin_templates(out, n)
        return sorted(self.ffi.string(out[i]).decode() for i in range(n))

    def render(self, messages: list[dict[str, str]]) -> str:
        """``messages`` through the chat template, with the assistant's turn opened."""
        ffi, keep = self.ffi, []
        arr = ffi.new("llama_chat_message[]", len(messages))
        for i, m in enumerate(messages):
            role, content = ffi.new("char[]", m["role"].encode()), ffi.new("char[]", m["content"].encode())
            keep += [role, content]
            arr[i].role, arr[i].content = role, content
        tmpl = ffi.new("char[]", self.template)
        size = max(1024, 2 * sum(len(m["content"].encode()) for m in messages) + 1024)
        for _ in range(2):
            buf = ffi.new(f"char[{size}]")
            n = self.lib.llama_chat_apply_template(tmpl, arr, len(messages), True, buf, size)
            if n < 0:
                raise ValueError(f"the chat template '{self.model.template}' cannot render these messages")
            if n <= size:
                return ffi.string(buf, n).decode("utf-8", "replace")
            size = n + 1
        raise ValueError("the chat template's output did not fit")

    # --- generation
    def _slot_for(self, tokens: list[int]) -> tuple[int, int]:
        """The KV-cache slot to use for ``tokens`` and how many leading tokens it already holds.

        A slot is reused when the prompt continues what it holds, at least ``SLOT_SIMILARITY``
        of it (the same conversation's next call; another run of the same framework and task,
        whose prompt differs only near its end): the longest such match. Otherwise an empty
        slot, else the least recently used one, so one framework's prompt never evicts
        another's for the few template tokens every prompt starts with."""
        common = [len(os.path.commonprefix([cached, tokens[:-1]])) for cached in self.slots]  # >= 1 token evaluated
        similar = [i for i, cached in enumerate(self.slots) if cached and common[i] >= SLOT_SIMILARITY * len(cached)]
        if similar:
            slot = max(similar, key=lambda i: (common[i], -self.used[i]))
        else:  # an empty slot first, else the least recently used one
            slot = min(range(len(self.slots)), key=lambda i: (bool(self.slots[i]), self.used[i]))
        return slot, common[slot]

    def _eval(self, tokens: list[int], n_past: int, seq: int) -> int:
        """Evaluate ``tokens`` at positions ``n_past...`` of sequence ``seq`` in batches of
        ``n_batch``, logits for the last token only (the bindings' own method is sequence 0 only)."""
        lib, n_batch = self.lib, self.llm._n_batch
        for start in range(0, len(tokens), n_batch):
            chunk = tokens[start : start + n_batch]
            batch = lib.llama_batch_init(len(chunk), 0, 1)
            try:
                batch.n_tokens = len(chunk)
                for i, tok in enumerate(chunk):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, n_past + start + i, 1
                    batch.seq_id[i][0], batch.logits[i] = seq, 0
                if start + len(chunk) >= len(tokens):
                    batch.logits[len(chunk) - 1] = 1
                if lib.llama_decode(self.llm._ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed")
            finally:
                lib.llama_batch_free(batch)
        return n_past + len(tokens)

    def _forget(self, seq: int | None = None) -> None:
        """Empty one slot's KV cache (None: every slot)."""
        mem = self.lib.llama_get_memory(self.llm._ctx)
        for i in range(len(self.slots)) if seq is None else [seq]:
            self.lib.llama_memory_seq_rm(mem, i, 0, -1)
            self.slots[i] = []

    def _prefill(self, tokens: list[int]) -> tuple[int, int]:
        """Evaluate ``tokens`` in a slot, reusing the tokens it shares with what that slot
        holds (as llama.cpp's server reuses a slot's prompt); returns (slot, n_past)."""
        seq, common = self._slot_for(tokens)
        self.calls_served += 1
        self.used[seq] = self.calls_served
        mem = self.lib.llama_get_memory(self.llm._ctx)
        if not self.lib.llama_memory_seq_rm(mem, seq, common, -1):
            self.lib.llama_memory_seq_rm(mem, seq, 0, -1)
            common = 0
        self.slots[seq] = list(tokens[:common])
        n_past = self._eval(tokens[common:], common, seq)
        self.slots[seq] = list(tokens)
        return seq, n_past

    def _generate(self, tokens, max_tokens, temperature, top_p, seed, stops, stop_at_eog=True):
        llm, lib = self.llm, self.lib
        llm._configure_generation_sampler(temperature, 40, top_p, 0.05, 1.0, 64, seed)
        t0 = time.perf_counter()
        seq, n_past = self._prefill(tokens)
        t1 = time.perf_counter()
        out, raw, finish = [], b"", "length"
        try:
            for _ in range(max_tokens):
                tok = llm._sample_token()
                if stop_at_eog and lib.llama_vocab_is_eog(llm._vocab, tok):
                    finish = "stop"
                    break
                out.append(tok)
                raw += llm._token_to_bytes(tok)
                n_past = self._eval([tok], n_past, seq)
                self.slots[seq].append(tok)
                if stops and any(s in raw.decode("utf-8", "ignore") for s in stops):
                    finish = "stop"
                    break
        except BaseException:
            self._forget(seq)
            raise
        text = raw.decode("utf-8", "replace")
        if stops:
            cut = [text.find(s) for s in stops if s in text]
            text = text[: min(cut)] if cut else text
        return text, len(out), finish, t1 - t0, time.perf_counter() - t1

    def warm_up(self) -> dict:
        """Prompt and generation speed (tokens/s), measured on a fixed text at start: a first,
        unmeasured pass touches the weights and buffers (the first call is several times slower).
        Any forward pass reads every weight, so the first pass is a short one (a few tokens in,
        two out): the measured pass alone is full length."""
        text = WARMUP_TEXT * (1 + LOCAL_MODEL_WARMUP_PROMPT_TOKENS // 16)
        tokens = self.llm.tokenize(text, add_special=True, parse_special=False)[:LOCAL_MODEL_WARMUP_PROMPT_TOKENS]
        with self.lock:
            for prompt, n_gen in ((tokens[:WARMUP_TOUCH_TOKENS], 2), (tokens, LOCAL_MODEL_WARMUP_OUTPUT_TOKENS)):
                self._forget()
                _, n_out, _, pp_s, tg_s = self._generate(
                    prompt, n_gen, 0.7, 0.95, self.model.seed, [], stop_at_eog=False
                )
            self._forget()
        return {
            "prompt_tokens": len(tokens),
            "prompt_tokens_per_s": round(len(tokens) / max(pp_s, 1e-6), 1),
            "output_tokens": n_out,
            "generation_tokens_per_s": round(n_out / max(tg_s, 1e-6), 1),
        }

    def complete(self, body: dict) -> tuple[int, dict]:
        """(status, JSON body) of one chat completion request."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("'messages' must be a non-empty list", "invalid_request_error")
        offered: list = body["tools"] if isinstance(body.get("tools"), list) else []
        choice = body.get("tool_choice")
        try:
            prompt = self.render(toolcalls.render_messages(messages, offered, choice))
        except ValueError as exc:
            return 400, _error(str(exc), "invalid_request_error")
        tokens = self.llm.tokenize(prompt, add_special=True, parse_special=True)
        room = self.model.context - len(tokens) - 1
        if room < 1:
            return 400, _error(
                # OpenAI's wording ("maximum context length"), which LiteLLM maps to its
                # ContextWindowExceededError like any provider's: the gateway records the limit.
                f"This model's maximum context length is {self.model.context} tokens; "
                f"the prompt has {len(tokens)} tokens",
                "context_length_exceeded",
            )
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = min(self.model.max_output_tokens, room, asked if isinstance(asked, int) and asked > 0 else 1 << 30)
        temp = body.get("temperature")
        temp = float(temp) if isinstance(temp, (int, float)) and not isinstance(temp, bool) else self.model.temperature
        top_p = body.get("top_p")
        top_p = float(top_p) if isinstance(top_p, (int, float)) and not isinstance(top_p, bool) else 0.95
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) and stop else [s for s in stop or [] if isinstance(s, str) and s]
        with self.lock:
            index = self.calls
            self.calls += 1
            seed = body.get("seed")
            seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else self.model.seed + index
            text, n_out, finish, _, _ = self._generate(tokens, limit, temp, top_p, seed & 0xFFFFFFFF, stops)
        calls = toolcalls.parse_tool_calls(text) if toolcalls.tools_prompt(offered, choice) else []
        message: dict = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls"
        return 200, {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "system_fingerprint": f"{ENGINE}-{metadata.version(ENGINE)}",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": n_out, "total_tokens": len(tokens) + n_out},
        }


def _error(message: str, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _chunks(resp: dict) -> list[dict]:
    """A finished completion as OpenAI stream chunks (role+content, tool calls, finish, usage)."""
    msg, choice = resp["choices"][0]["message"], resp["choices"][0]
    base = {k: resp[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    delta: dict = {"role": "assistant", "content": msg.get("content") or ""}
    out = [base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    if msg.get("tool_calls"):
        calls = [dict(c, index=i) for i, c in enumerate(msg["tool_calls"])]
        out.append(base | {"choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]})
    out.append(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    out.append(base | {"choices": [], "usage": resp["usage"]})
    return out


def handler(engine: Engine, key: str):
    """The request handler: ``key`` is the server's (module docstring)."""
    expected = f"Bearer {key}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # the gateway records every exchange
            pass

        def _refused(self) -> bool:
            """True (a 401 sent) unless the request carries the server's key."""
            given = (self.headers.get("Authorization") or "").encode("latin-1", "replace")
            if hmac.compare_digest(given, expected):
                return False
            self.close_connection = True  # its body, if any, is not read
            self._send(401, _error("this server answers its grid's gateway only", "invalid_api_key"))
            return True

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            path = self.path.split("?")[0].rstrip("/")
            if path == "/health":
                self._send(200, {"status": "ok"})
            elif self._refused():
                return
            elif path in ("/v1/models", "/models"):
                self._send(
                    200, {"object": "list", "data": [{"id": engine.name, "object": "model", "owned_by": "local"}]}
                )
            else:
                self._send(404, _error("no such route", "not_found"))

        def do_POST(self):
            path = self.path.split("?")[0].rstrip("/")
            if self._refused():
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self._send(400, _error("the body is not JSON", "invalid_request_error"))
            if path not in ("/v1/chat/completions", "/chat/completions"):
                return self._send(404, _error("no such route", "not_found"))
            if not isinstance(body, dict):
                return self._send(400, _error("the body is not a JSON object", "invalid_request_error"))
            try:
                status, resp = engine.complete(body)
            except Exception as exc:  # noqa: BLE001 - an engine failure is this call's 500, not the server's end
                status, resp = 500, _error(f"{type(exc).__name__}: {exc}", "server_error")
            if status != 200 or not body.get("stream"):
                return self._send(status, resp)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _chunks(resp):
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return Handler


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    key = die_with_parent(int(config["parent_pid"]))
    out = sys.stdout
    try:
        engine = Engine(
            config["name"], LocalModel.model_validate(config["entry"]), Path(config["catalog"]), Path(config["cache"])
        )
        speed = engine.warm_up()
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler(engine, key))
    except Exception as exc:  # noqa: BLE001 - reported to the driver as one line
        msg = str(exc) if isinstance(exc, ClaimgridError) else f"{type(exc).__name__}: {exc}"
        out.write(json.dumps({"error": msg}) + "\n")
        out.flush()
        return 2
    server.daemon_threads = True
    out.write(json.dumps({"port": server.server_address[1], "provenance": engine.provenance | {"speed": speed}}) + "\n")
    out.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
