"""Which text flowmem can store: the one decision, for every entry point (pure).

JSON can spell a lone UTF-16 surrogate (``"\\ud800"``) and Python's ``str`` can hold
one, but UTF-8 cannot encode it: SQLite, PostgreSQL and every JSON response would
fail on it. ``storable_text`` is the one function that says whether a string is
text flowmem can store; ``check_storable`` applies it to every string and object
key of a value and raises ``InvalidTextError`` (code ``invalid_text``) naming the
first field that fails, so such text is refused before anything is written
(issue 12; docs/api.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from flowmem.errors import InvalidTextError

# Every code point UTF-8 cannot encode: the UTF-16 surrogates.
_UNENCODABLE = re.compile("[\ud800-\udfff]")
# One C-speed serialization of a whole value, searched once (the common, valid case).
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":"))


def storable_text(text: str) -> bool:
    """True when ``text`` can be stored and served: it encodes as UTF-8 (no lone surrogate)."""
    return text.isascii() or _UNENCODABLE.search(text) is None


def _describe(text: str) -> str:
    found = _UNENCODABLE.search(text)
    return "" if found is None else f" (U+{ord(found.group()):04X} at {found.start()})"


def unstorable_path(value: object) -> tuple[list[str], str] | None:
    """Return (path, text) of the first string or key in ``value`` that is not storable.

    Walks mappings (keys and values), lists and tuples without recursion; any other
    value holds no text flowmem stores as is. None when everything is storable.
    """
    stack: list[tuple[list[str], object]] = [([], value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not storable_text(item):
                return path, item
        elif isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                if isinstance(key, str) and not storable_text(key):
                    return [*path, key.encode("utf-8", "backslashreplace").decode()], key
                children.append(([*path, str(key)], child))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(([*path, str(i)], child) for i, child in reversed(list(enumerate(item))))
    return None


def check_storable(value: object, field: str) -> None:
    """Raise ``InvalidTextError`` when any string or key in ``value`` is not storable.

    ``field`` names ``value`` in the error (``messages``, ``metadata``, ``key``…);
    the error's ``field`` detail is the path to the offending text, dotted.
    """
    if isinstance(value, str):
        if storable_text(value):
            return
    elif value is None or isinstance(value, (bool, int, float)):
        return
    else:
        try:
            if storable_text(_ENCODER.encode(value)):
                return
        except (TypeError, ValueError, RecursionError):
            pass  # not plain JSON: walk it (the JSON checks report what is wrong with it)
    found = unstorable_path(value)
    if found is None:
        return
    path, text = found
    where = ".".join([field, *path])
    raise InvalidTextError(
        f"{where} holds text that cannot be stored: a surrogate code point{_describe(text)}, "
        "which UTF-8 cannot encode (a lone \\uD800-\\uDFFF escape in JSON)",
        field=where,
    )
