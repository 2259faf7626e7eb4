"""The one JSON renderer of the API's answers (what FastAPI's ``JSONResponse`` writes, built once)."""

from __future__ import annotations

import json
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def render(content: Any) -> bytes:
    """Encode a result exactly as FastAPI's ``JSONResponse`` does (one encoder, built once)."""
    return _ENCODER.encode(content).encode("utf-8")
