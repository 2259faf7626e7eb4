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
# A JSON text read one token at a time (each escape whole, so "\\\\" is one token):
# everything that cannot decode to a surrogate — any byte but a backslash or 0xED, an
# escape other than \uD800-\uDFFF, a high-low escape pair (one character), and the
# bytes ED 80-9F (U+D000-U+D7FF). Possessive, so the scan is linear; it stops
# where a surrogate may begin.
_NO_SURROGATE = re.compile(
    rb"(?:[^\\\xed]++"
    rb"|\\[^u]"
    rb"|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}"
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|\xed[\x80-\x9f])*+"
)


def storable_text(text: str) -> bool:
    """True when ``text`` can be stored and served: it encodes as UTF-8 (no surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_text_may_hold_surrogates(body: bytes) -> bool:
    """True when a valid JSON text may decode to a surrogate (one linear scan in C).

    False guarantees that ``json.loads(body)`` holds only storable text; True only
    says that ``check_storable`` must look (a lone ``\\uD800`` escape, or its bytes).
    """
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        return True  # UTF-16/32 JSON, which json.loads reads too: not scanned here
    found = _NO_SURROGATE.match(body)
    return found is None or found.end() != len(body)


def _describe(text: str) -> str:
    found = _UNENCODABLE.search(text)
    return "" if found is None else f" (U+{ord(found.group()):04X} at {found.start()})"


def _all_storable(value: object) -> bool:
    """True when every string and key in ``value`` is storable (the fast pass: no paths)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not storable_text(item):
                return False
        elif isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and not key.isascii() and not storable_text(key):
                    return False
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, Mapping):
            return False  # a mapping of another kind: the walk with paths decides
    return True


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
    if _all_storable(value):
        return
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
