"""``tiktoken_counter`` (issue 28): OpenAI models' counts from an encoding on this machine, never fetched."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken
import tiktoken.load

from flowmem.core.tokens import ROW_TOKENS, estimate_tokens
from flowmem.errors import ConfigurationError
from flowmem.integrations.openai_tokens import load_encoding, tiktoken_counter
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore


def _bytes_encoding() -> tiktoken.Encoding:
    """A real tiktoken Encoding with one token per byte (no file needed)."""
    ranks = {bytes([b]): b for b in range(256)}
    return tiktoken.Encoding("bytes", pat_str=r"[\s\S]", mergeable_ranks=ranks, special_tokens={})


def test_texts_are_counted_by_the_encoding_and_other_parts_by_the_default_rules() -> None:
    count = tiktoken_counter(_bytes_encoding())
    assert count({"role": "user", "content": "héllo"}) == ROW_TOKENS + 6  # one a byte
    image = {"type": "image", "url": "https://example.com/cat.png"}
    row = {"role": "user", "content": [{"type": "text", "text": "abc"}, image]}
    image_only = {"role": "user", "content": [image]}
    assert count(row) == ROW_TOKENS + 3 + estimate_tokens(image_only) - ROW_TOKENS
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]}
    assert count(call) == estimate_tokens(call) - 1 - 1 + 1 + 2  # name and arguments a byte each


def test_an_encoding_not_on_this_machine_is_refused_and_nothing_is_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    fetched: list[str] = []
    monkeypatch.setattr(tiktoken.load, "read_file", fetched.append)
    load_encoding.cache_clear()
    with pytest.raises(ConfigurationError, match="not on this machine"):
        tiktoken_counter("gpt-4o")
    assert fetched == [] and tiktoken.load.read_file == fetched.append  # put back as found
    load_encoding.cache_clear()


def test_an_unknown_model_names_the_encodings() -> None:
    with pytest.raises(ConfigurationError, match="o200k_base"):
        load_encoding("no-such-model")


def test_the_service_windows_with_a_tiktoken_counter() -> None:
    service = MemoryService(MemoryStore())
    alice = ExecutionContext(user_id="alice")
    service.append("user", "k", [{"role": "user", "content": "x" * 50} for _ in range(5)], alice)
    got = service.load("user", "k", alice, max_tokens=120, counter=tiktoken_counter(_bytes_encoding()))
    assert len(got.messages) == 2 and got.window is not None and got.window.tokens == 108
