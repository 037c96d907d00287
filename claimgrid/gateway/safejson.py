"""The gateway's JSON responses, for any content a model or a client sent.

Starlette's ``JSONResponse`` encodes UTF-8 strictly, so a lone surrogate in a model's answer
(a real provider's ``"\\ud800"``, a reference policy's text) raised while the answer was sent.
Here a lone surrogate is written as its JSON escape (claimgrid.anybytes.json_bytes): the
client reads back exactly the string the model produced.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from claimgrid.anybytes import json_bytes


class SafeJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json_bytes(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
