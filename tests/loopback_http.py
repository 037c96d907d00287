"""httpx's one-call functions (``post``, ``get``, ``stream``) for the tests' loopback calls,
with one TLS context for the whole test process.

``httpx.post(...)`` builds a new ``Client`` per call, and each new client loads the CA bundle
into a new SSL context: ~28 ms of CPU per call, though every call here is plain HTTP to
127.0.0.1. The gateway tests make thousands of calls (tens of CPU-seconds per CI run). Each
call still gets its own client and connection, as before; only the unused TLS context is
shared."""

from __future__ import annotations

import functools

import httpx

TLS = httpx.create_ssl_context()
post = functools.partial(httpx.post, verify=TLS)
get = functools.partial(httpx.get, verify=TLS)
stream = functools.partial(httpx.stream, verify=TLS)
