"""A provider-format read written page by page is the whole read's bytes (issue 38 §2, decision 0113).

Oracle: ``routes.memory._converted`` over every row at once (MEM-5 normalization,
then ``write_document``). The paged form (``api.provider_pages``) reads the rows in
pages of a few rows, as ``MemoryService.next_page`` serves them; a history
normalization would repair too (``RepairRows``: a late result read again by its
cursor, as ``MemoryService.read_segment`` serves one row).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from flowmem.api.provider_pages import first_pass
from flowmem.api.render import render, render_pieces
from flowmem.api.routes.memory import _converted
from flowmem.core.normalize_pages import RepairRows
from flowmem.results import BufferText
from flowmem.service import PagedText
from flowmem.store.base import Address, BodyPage
from tests.formats.test_fast import ANY_HISTORY

FORMATS = ("openai", "responses", "anthropic", "gemini")
ADDRESS = Address("user", "alice", "long")


class Pages:
    """What ``MemoryService.next_page`` serves of a buffer of ``bodies``: ``size`` rows a page."""

    def __init__(self, bodies: list[str], size: int) -> None:
        self.bodies, self.size, self.reads = bodies, size, 0

    def page(self, after: int) -> BodyPage:
        rows = [(n, self.bodies[n]) for n in range(after + 1, min(after + 1 + self.size, len(self.bodies)))]
        return BodyPage((0, 1), len(self.bodies), rows, False, after + 1 + self.size < len(self.bodies))

    def next_page(self, paged: PagedText, after: int) -> BodyPage:
        self.reads += 1
        return self.page(after)

    def read_segment(self, read: Any, segment: Any, after: int | None = None) -> BodyPage:
        """One row read again (a late result), as ``provider_pages`` asks for it."""
        assert after is None and segment.before == segment.after + 2
        return BodyPage((0, 1), len(self.bodies), [(segment.after + 1, self.bodies[segment.after + 1])], False, False)

    def first(self) -> PagedText:
        page = self.page(-1)
        text = BufferText([body for _, body in page.bodies], len(self.bodies), None, "alice")
        after = page.bodies[-1][0] if page.bodies else None
        return PagedText(text, ADDRESS, (0, 1), None, after, page.more)


def _with_systems(history: list[Any], at: list[int]) -> list[Any]:
    """``history`` with system rows put among its rows (normalization moves them first)."""
    out = list(history)
    for n, place in enumerate(at):
        out.insert(min(place, len(out)), {"role": "system", "content": f"rule {n}"})
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ANY_HISTORY,
    st.lists(st.integers(0, 12), max_size=3),
    st.sampled_from(FORMATS),
    st.integers(1, 4),
)
def test_mem_5_a_provider_read_page_by_page_is_the_whole_reads_bytes(
    history: list[Any], systems: list[int], fmt: str, size: int
) -> None:
    entries = _with_systems(history, systems)
    bodies = [json.dumps(entry, ensure_ascii=False, separators=(",", ":")) for entry in entries]
    pages = Pages(bodies, size)
    paged = pages.first()
    whole = render(_converted(BufferText(bodies, len(bodies), None, "alice"), fmt))
    stream = first_pass(paged, pages, fmt, _converted, len(bodies), render_pieces)  # type: ignore[arg-type]
    event("repaired page by page" if isinstance(stream.rows, RepairRows) else "page by page")
    parts = [stream.head(render_pieces), stream.step(pages)]  # type: ignore[arg-type]
    while stream.more:
        parts.append(stream.step(pages))  # type: ignore[arg-type]
    parts.append(stream.tail(render_pieces))
    assert b"".join(parts) == whole


def test_a_stored_history_is_written_page_by_page_holding_a_page() -> None:
    """A long history needing no repair but its system rows moved: streamed, the same bytes."""
    rows: list[Any] = []
    for n in range(300):
        rows.append({"role": "user", "content": f"q{n}"})
        rows.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "name": "f", "args": {}}]})
        rows.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"r{n}"})
        if n % 50 == 7:
            rows.append({"role": "system", "content": f"rule {n}"})
    bodies = [json.dumps(row, separators=(",", ":")) for row in rows]
    for fmt in FORMATS:
        pages = Pages(bodies, 16)
        stream = first_pass(pages.first(), pages, fmt, _converted, len(bodies), render_pieces)  # type: ignore[arg-type]
        assert stream is not None, fmt
        parts = [stream.head(render_pieces), stream.step(pages)]  # type: ignore[arg-type]
        while stream.more:
            parts.append(stream.step(pages))  # type: ignore[arg-type]
        parts.append(stream.tail(render_pieces))
        assert max(map(len, parts)) < 16 * 1024, fmt  # a page's messages at a time
        assert b"".join(parts) == render(_converted(BufferText(bodies, len(bodies), None, "alice"), fmt))


def test_a_run_of_user_turns_merged_into_one_message_is_written_as_it_comes() -> None:
    """Anthropic and Gemini make one message of 2,000 user rows: written page by page, never held whole."""
    bodies = [json.dumps({"role": "user", "content": f"{n} " + "x" * 100}) for n in range(2000)]
    for fmt in ("anthropic", "gemini"):
        pages = Pages(bodies, 64)
        stream = first_pass(pages.first(), pages, fmt, _converted, len(bodies), render_pieces)  # type: ignore[arg-type]
        assert stream is not None
        parts = [stream.head(render_pieces), stream.step(pages)]  # type: ignore[arg-type]
        while stream.more:
            parts.append(stream.step(pages))  # type: ignore[arg-type]
        parts.append(stream.tail(render_pieces))
        whole = render(_converted(BufferText(bodies, len(bodies), None, "alice"), fmt))
        assert b"".join(parts) == whole
        assert len(json.loads(whole)["messages"]) == 1, fmt
        assert max(map(len, parts)) < 64 * 200, fmt  # a page of rows' blocks at a time
