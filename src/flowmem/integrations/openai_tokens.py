"""A token counter for OpenAI models by tiktoken, from an encoding already on this machine (issue 28).

``tiktoken_counter("gpt-4o")`` counts a stored row's texts (content, reasoning text,
tool call names and arguments) with the model's tiktoken encoding and the other
parts (images, files, audio, opaque reasoning payloads) by the rules of
``flowmem.core.tokens`` (docs/memory.md, "Counting tokens"), plus the same per-row
and per-call framing. tiktoken fetches an encoding's file from the network the first
time; flowmem never does: an encoding that is not in tiktoken's cache
(``TIKTOKEN_CACHE_DIR``) is a ConfigurationError that says so, and nothing is fetched.
Needs the ``tiktoken`` extra (``pip install 'flowmem[tiktoken]'``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from flowmem.core.tokens import count_tokens
from flowmem.errors import ConfigurationError
from flowmem.integrations import require

if TYPE_CHECKING:
    from collections.abc import Callable

    import tiktoken

_LOADING = threading.Lock()  # tiktoken's file reader is swapped while an encoding loads


def tiktoken_counter(
    model: str | tiktoken.Encoding = "o200k_base",
) -> Callable[[Mapping[str, Any]], int]:
    """A counter (one stored row → its tokens) for ``model``: a model name, an encoding name, or an Encoding."""
    encoding = model if not isinstance(model, str) else load_encoding(model)
    encode = encoding.encode_ordinary

    def text(value: str) -> int:
        return len(encode(value))

    def counter(row: Mapping[str, Any]) -> int:
        return count_tokens(row, text)

    return counter


@lru_cache(maxsize=16)
def load_encoding(model: str) -> tiktoken.Encoding:
    """The tiktoken encoding of a model or encoding name, from tiktoken's cache only.

    ConfigurationError for an unknown name, or an encoding whose file is not cached
    on this machine (nothing is downloaded: put the file in ``TIKTOKEN_CACHE_DIR``).
    """
    require("tiktoken", "tiktoken")
    import tiktoken
    import tiktoken.load

    if model in tiktoken.list_encoding_names():
        name = model
    else:
        try:
            name = tiktoken.encoding_name_for_model(model)
        except KeyError:
            raise ConfigurationError(
                f"tiktoken knows no model or encoding {model!r}: name one of "
                f"{', '.join(tiktoken.list_encoding_names())}, or a model it maps"
            ) from None

    def refuse(blobpath: str) -> bytes:
        raise ConfigurationError(
            f"the tiktoken encoding {name!r} is not on this machine, and flowmem downloads "
            f"nothing: put its file ({blobpath}) in tiktoken's cache (TIKTOKEN_CACHE_DIR), "
            "or count with flowmem's default counter"
        )

    with _LOADING:
        fetch = tiktoken.load.read_file
        tiktoken.load.read_file = refuse
        try:
            return tiktoken.get_encoding(name)
        finally:
            tiktoken.load.read_file = fetch


__all__ = ["load_encoding", "tiktoken_counter"]
