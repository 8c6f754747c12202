"""JSON answers of the topic API: ASCII-escaped (an echoed topic can never fail to encode),
never NaN or Infinity (not JSON: a browser's parser refuses the whole answer), and errors
always ``{"error": "<what and where>"}``. Used by every route module."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from topic_api.models import Error


class ApiJSON(JSONResponse):
    def render(self, content: object) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def error(status: int, message: str, *, headers: dict[str, str] | None = None) -> ApiJSON:
    return ApiJSON(Error(error=message), status_code=status, headers=headers)
