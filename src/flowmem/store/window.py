"""A token-budget window read from a store (issue 28 §1): the core's rule over ``read_tail``.

The rows are read from the buffer's end and fed to ``flowmem.core.window.WindowScan``
until it is done, so a window of k rows reads O(k) rows whatever the buffer's size.
With the default counter the tokens are the ones stored per row (and the buffer's
total, for what was cut); a caller's counter counts each row read, and the cut
tokens are then not known without reading the whole buffer (``cut_tokens`` None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from flowmem.core import Message
from flowmem.core.fast import fast_row_facts
from flowmem.core.tokens import Counter
from flowmem.core.window import RowFacts, Window, WindowScan
from flowmem.core.window_cut import Cut, CutScan
from flowmem.errors import BufferChangedError, InvalidInputError
from flowmem.store.base import TAIL_BATCH, Address, BufferStore, TailRow
from flowmem.store.rows import dump_json
from flowmem.store.tail import FactsTail, SupportsTailFacts, plain_facts

READ_ATTEMPTS = 3  # reads of a buffer written while it was read from its end
T = TypeVar("T")


def checked_count(counter: Counter, row: Mapping[str, Any]) -> int:
    """A caller's counter's count of ``row``; InvalidInputError unless an integer >= 0."""
    tokens = counter(row)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise InvalidInputError(f"a token counter must return an integer >= 0, got {tokens!r}")
    return tokens


@dataclass(frozen=True)
class WindowAsk:
    """What a token window asks of the window rules (``flowmem.core.window``).

    At most ``budget`` tokens; the system rows kept and counted unless ``keep_system``
    is False; with ``first_role``, the first non-system row has that role.
    """

    budget: int
    keep_system: bool = True
    first_role: str | None = None


def read_window(
    store: BufferStore, address: Address, ask: WindowAsk, counter: Counter | None = None
) -> tuple[list[Message], Window]:
    """Return the rows of the longest sendable suffix within ``ask.budget`` tokens, and the window.

    WindowTooSmallError when the newest turn alone is over the budget (nothing cut silently).
    """
    return reread(lambda: _read_once(store, address, ask, counter))


def reread(work: Callable[[], T]) -> T:
    """``work()``, again when the buffer was written while it read (at most ``READ_ATTEMPTS`` times)."""
    for attempt in range(READ_ATTEMPTS):
        try:
            return work()
        except BufferChangedError:
            if attempt == READ_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _read_once(
    store: BufferStore, address: Address, ask: WindowAsk, counter: Counter | None
) -> tuple[list[Message], Window]:
    tail = store.read_tail(address, TAIL_BATCH, ask.budget)

    def tokens(item: TailRow) -> int:
        return item.tokens if counter is None else checked_count(counter, item.row)

    try:
        read: dict[int, Message] = {item.cursor: item.row for item in tail.systems}
        systems = {item.cursor: tokens(item) for item in tail.systems}
        scan = WindowScan(ask.budget, systems, ask.keep_system, ask.first_role)

        def facts() -> Iterator[tuple[int, RowFacts]]:  # the hot loop: a row's work, no more
            for cursor, row, stored in tail.rows:
                read[cursor] = row
                known = systems.get(cursor) if systems else None
                if known is None:
                    known = stored if counter is None else checked_count(counter, row)
                yield cursor, fast_row_facts(row, known)

        scan.feed_rows(facts())
    finally:
        tail.close()
    window = scan.window(tail.count, tail.tokens if counter is None else None)
    return [read[cursor] for cursor in window.kept], window


def tail_facts(store: BufferStore, address: Address, budget: int) -> FactsTail:
    """The rows' window facts from the buffer's end: in SQL when the store can (``SupportsTailFacts``).

    The speed seam of ``read_cut`` (issue 38 §2): SQLite gives most rows' facts from
    stored columns, so a cut parses no JSON in the thread that shares the interpreter
    lock with the event loop; other stores' rows are parsed (``plain_facts``, the
    oracle: ``tests/store/test_tail_facts.py``).
    """
    if isinstance(store, SupportsTailFacts):
        return store.read_tail_facts(address, TAIL_BATCH, budget)
    return plain_facts(store.read_tail(address, TAIL_BATCH, budget))


@dataclass(frozen=True)
class CutRead:
    """A window's cut read from a store, without its rows (``read_cut``).

    ``version``: the buffer read (``BodyPage.version``; None: no buffer), so the
    suffix's rows, those from cursor ``cut.start`` on, can be paged from the same
    snapshot; ``systems``: the texts of the kept system rows before the suffix.
    """

    cut: Cut
    version: tuple[int, int] | None
    systems: list[str]


def read_cut(store: BufferStore, address: Address, ask: WindowAsk) -> CutRead:
    """Where the window ``ask`` asks for starts (the default counter), reading facts only.

    The rows are read from the buffer's end a batch at a time, as ``read_window``
    reads them, and none is kept: what the window rules need of each (its role,
    ids and stored tokens, ``tail_facts``) goes into a ``CutScan``. WindowTooSmallError as
    ``read_window``; BufferChangedError when the buffer was written during the read.
    """
    tail = tail_facts(store, address, ask.budget)
    try:
        systems = {item.cursor: item.tokens for item in tail.systems}
        scan = CutScan(ask.budget, systems, ask.keep_system, ask.first_role)
        scan.feed_rows(tail.facts)
    finally:
        tail.close()
    cut = scan.cut(tail.count, tail.tokens)
    kept = set(cut.systems)
    texts = [dump_json(item.row, "message") for item in tail.systems if item.cursor in kept]
    return CutRead(cut, tail.version, texts)
