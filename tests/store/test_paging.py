"""Paged buffer reads (``Store.page_bodies``) on every backend: bounded pages, one snapshot or a refusal.

What the HTTP API streams a large buffer read from (issue 24 §3): a reader holds one
page, never the buffer, and a write between two pages is refused rather than mixed in.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.errors import BufferChangedError, InvalidInputError
from flowmem.store import Address, Store
from flowmem.store.base import BodyPage

BUF = Address("user", "alice", "paged")


def _fill(store: Store, count: int, width: int = 40) -> None:
    rows = [{"role": "user", "content": f"{n:05d}" + "é" * width} for n in range(count)]
    for start in range(0, count, 100):
        store.append(BUF, rows[start : start + 100])


def _read_all(
    store: Store, *, before: int | None = None, last: int | None = None, **size: Any
) -> tuple[list[tuple[int, str]], list[BodyPage]]:
    """Every page of one read, as the HTTP API reads them."""
    first = store.page_bodies(BUF, before=before, last=last, **size)
    pages = [first]
    while pages[-1].more:
        pages.append(
            store.page_bodies(
                BUF, after=pages[-1].bodies[-1][0], before=before, version=first.version, **size
            )
        )
    return [body for page in pages for body in page.bodies], pages


def test_pages_together_are_the_rows_load_bodies_returns(store: Store) -> None:
    _fill(store, 250)
    whole = store.load_bodies(BUF)
    found, pages = _read_all(store, rows=32, chars=10_000)
    assert found == whole
    assert len(pages) == 8 and all(p.count == 250 for p in pages)
    assert not pages[-1].more and all(p.more for p in pages[:-1])
    cursor = whole[200][0]
    for last in (0, 1, 7, 64, 200, 10_000):
        found, pages = _read_all(store, before=cursor, last=last, rows=16, chars=10_000)
        assert found == store.load_bodies(BUF, last, cursor)
        assert pages[0].older == (0 < last < 200)


def test_a_page_ends_at_its_size_so_a_reader_holds_one_page(store: Store) -> None:
    _fill(store, 60, width=200)  # rows of about 220 characters
    size = len(store.load_bodies(BUF, 1)[0][1])
    found, pages = _read_all(store, rows=1000, chars=1000)
    assert [b for b in found] == store.load_bodies(BUF)
    for page in pages:
        assert len(page.bodies) >= 1
        # a page stops once it holds `chars` characters: at most chars + one row
        assert sum(len(body) for _, body in page.bodies) < 1000 + size
    one = store.page_bodies(BUF, rows=1000, chars=1)  # at least one row
    assert len(one.bodies) == 1 and one.more


def test_a_write_between_two_pages_is_refused_not_mixed_in(store: Store) -> None:
    _fill(store, 50)
    first = store.page_bodies(BUF, rows=10)
    after = first.bodies[-1][0]
    again = store.page_bodies(BUF, after=after, rows=10, version=first.version)
    assert again.bodies == store.load_bodies(BUF)[10:20]
    store.append(BUF, [{"role": "user", "content": "late"}])
    with pytest.raises(BufferChangedError):
        store.page_bodies(BUF, after=after, rows=10, version=first.version)
    fresh = store.page_bodies(BUF, rows=10)
    assert fresh.version != first.version and fresh.count == 51
    store.clear(BUF)
    with pytest.raises(BufferChangedError):
        store.page_bodies(BUF, after=after, rows=10, version=fresh.version)


def test_a_recreated_buffer_is_another_version(store: Store) -> None:
    store.append(BUF, [{"role": "user", "content": "a"}])
    first = store.page_bodies(BUF)
    store.clear(BUF)
    store.append(BUF, [{"role": "user", "content": "a"}])
    with pytest.raises(BufferChangedError):
        store.page_bodies(BUF, version=first.version)


def test_a_missing_buffer_is_an_empty_page(store: Store) -> None:
    page = store.page_bodies(BUF)
    assert (page.version, page.count, page.bodies, page.more) == (None, 0, [], False)
    assert store.page_bodies(BUF, last=5).bodies == []


@pytest.mark.parametrize("bad", [{"rows": 0}, {"chars": 0}, {"last": -1}, {"before": -2}])
def test_a_page_refuses_bad_bounds(store: Store, bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        store.page_bodies(BUF, **bad)
