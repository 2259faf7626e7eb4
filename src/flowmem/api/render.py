"""The one JSON renderer of the API's answers (what FastAPI's ``JSONResponse`` writes, built once)."""

from __future__ import annotations

import json
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def render(content: Any) -> bytes:
    """Encode a result exactly as FastAPI's ``JSONResponse`` does (one encoder, built once)."""
    return _ENCODER.encode(content).encode("utf-8")


PIECE = 512  # list items one C call of the encoder writes in ``render_pieces``


def render_pieces(content: Any) -> bytes:
    """``render(content)``, byte for byte, written a piece at a time: for a long answer built in a thread.

    The C encoder holds the interpreter lock for its whole call: one call over a
    long ``messages`` list kept the event loop waiting tens of milliseconds (issue
    38 §2). Here a dict's values and a list's items go ``PIECE`` at a time, each a
    short call, so the loop's thread gets the lock between them.
    """
    return _pieces(content).encode("utf-8")


def _pieces(content: Any) -> str:
    if isinstance(content, dict) and all(isinstance(key, str) for key in content):
        fields = (f"{_ENCODER.encode(key)}:{_pieces(value)}" for key, value in content.items())
        return "{" + ",".join(fields) + "}"
    if isinstance(content, list) and len(content) > PIECE:
        parts = (_ENCODER.encode(content[at : at + PIECE])[1:-1] for at in range(0, len(content), PIECE))
        return "[" + ",".join(parts) + "]"
    return str(_ENCODER.encode(content))
