"""Whole request documents by format name (what the CLI reads and writes)."""

from __future__ import annotations

import pytest

from flowmem.errors import InvalidInputError
from flowmem.formats import FORMATS, read_document, write_document

ROWS = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "hi"},
]


def test_read_document_accepts_lists_and_request_bodies() -> None:
    assert (
        read_document("openai", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        == ROWS[1:]
    )
    assert read_document("openai", [{"role": "user", "content": "hi"}]) == ROWS[1:]
    assert (
        read_document("anthropic", {"system": "s", "messages": [{"role": "user", "content": "hi"}]})
        == ROWS
    )
    assert read_document("anthropic", [{"role": "user", "content": "hi"}]) == ROWS[1:]
    assert read_document("responses", {"instructions": "s", "input": "hi"}) == ROWS
    assert read_document("responses", {"input": [{"role": "user", "content": "hi"}]}) == ROWS[1:]
    assert read_document("responses", [{"role": "user", "content": "hi"}]) == ROWS[1:]


@pytest.mark.parametrize("name", FORMATS)
def test_write_then_read_document_round_trips(name: str) -> None:
    assert read_document(name, write_document(name, ROWS)) == ROWS


def test_write_document_shapes() -> None:
    assert write_document("anthropic", ROWS) == {
        "system": "s",
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert write_document("anthropic", ROWS[1:]) == {
        "messages": [{"role": "user", "content": "hi"}]
    }


def test_unknown_format_is_a_typed_error() -> None:
    with pytest.raises(InvalidInputError):
        read_document("cohere", [])
    with pytest.raises(InvalidInputError):
        write_document("cohere", [])
