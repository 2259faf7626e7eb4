"""The memory service's buffer reads, joined to ``MemoryService`` as a base class.

Whole (``load``, ``load_raw``, ``load_window_raw``), a batch at a time
(``iter_load``), a page at a time (``load_page``, ``first_page``/``next_page``,
``load_text``) and the long reads as ``PagedRead``s (``load(..., paged=True)`` and
``read_segment``, decision 0113). Each checks its arguments, resolves the scope through
the service (a refusal reads nothing, MEM-7) and reads the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

from flowmem.core import Message
from flowmem.core.tokens import Counter
from flowmem.errors import InvalidInputError
from flowmem.results import BufferPage, BufferResult, BufferRows, BufferText, TokenWindow
from flowmem.scope import ExecutionContext, Refusal, check_scope
from flowmem.service import paged_reads
from flowmem.service.checks import check_count, check_key, checked_address, window_args
from flowmem.service.conversation import read_key
from flowmem.service.paged_reads import PagedRead, Segment
from flowmem.service.part import ServicePart
from flowmem.store.base import Address, BodyPage
from flowmem.store.rows import check_batch
from flowmem.store.window import WindowAsk, read_window


@dataclass(frozen=True)
class PagedText:
    """The first page of a paged buffer read (``MemoryService.first_page``), and where it goes on.

    ``text``: this page's stored JSON texts, with the whole read's ``count``,
    ``next_before`` and ``resolved_scope_id`` (or its refusal). ``more``: pages
    follow; read each with ``MemoryService.next_page(paged, after)``, ``after`` the
    last cursor read (``after`` here for the first).
    """

    text: BufferText
    address: Address | None = None
    version: tuple[int, int] | None = None
    before: int | None = None
    after: int | None = None
    more: bool = False


def _load_budget(
    last: int | None, max_tokens: int | None, counter: Counter | None, first_role: str | None, include_archived: bool
) -> int | None:
    """A load's token budget (None: not a window), its arguments checked; a window with the archive is refused."""
    window = window_args(last, max_tokens, counter, first_role)
    if include_archived and window is not None:
        raise InvalidInputError("include_archived reads the whole buffer: leave out max_tokens")
    return window


class BufferReads(ServicePart):
    """``MemoryService``'s buffer reads; the service gives them its store and scope resolution."""

    if TYPE_CHECKING:

        def _with_archive(self, address: Address, last: int | None) -> BufferResult: ...

    @overload
    def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
        include_archived: bool = False,
        paged: Literal[False] = False,
    ) -> BufferResult: ...

    @overload
    def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
        include_archived: bool = False,
        paged: Literal[True],
    ) -> PagedRead: ...

    def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
        include_archived: bool = False,
        paged: bool = False,
    ) -> BufferResult | PagedRead:
        """Return the buffer (its last ``last`` rows when given) without appending.

        ``count`` is the whole buffer's row count. With ``max_tokens``: the longest
        sendable suffix within that many tokens (``load_window``). A refusal returns
        the empty neutral buffer (MEM-7). ``include_archived``: the rows compactions
        archived first, in order, then the live rows (``count`` of them: the first
        ``len(messages) - count`` are archived); not with ``last`` or ``max_tokens``.
        ``paged`` (with ``max_tokens`` or ``include_archived``, the default counter):
        a ``PagedRead`` instead, whose rows are read a page at a time
        (``read_segment``), for a caller that writes them as they come (the HTTP API).
        """
        name = check_key(key)
        check_count(last, "last", optional=True)
        window = _load_budget(last, max_tokens, counter, first_role, include_archived)
        if paged and (counter is not None or (window is None and not include_archived)):
            raise InvalidInputError("a paged load is a token window or a read with the archive, counted by default")
        address = self._read_address(scope, name, context)
        if isinstance(address, Refusal):
            return PagedRead(refusal=address) if paged else BufferResult(refusal=address)
        if paged:
            if window is not None:
                return paged_reads.window_read(self.store, address, window, keep_system, first_role)
            if last is not None:
                raise InvalidInputError("include_archived reads the whole buffer: leave out last", argument="last")
            return paged_reads.archive_read(self.store, address)
        _, resolved, name = address
        if window is not None:
            return self.load_window_raw(scope, resolved, name, window, counter, keep_system, first_role)
        return self.load_raw(scope, resolved, name, last, include_archived=include_archived)

    def _read_address(self, scope: str, key: str, context: ExecutionContext | None) -> Address | Refusal:
        """Where a read of ``key`` (checked) reads: the resolved scope id and the key ``read_key`` names, or the refusal."""
        resolved = self._resolve("load", scope, key, context)
        if isinstance(resolved, Refusal):
            return resolved
        return Address(check_scope(scope), resolved, read_key(self.store, scope, resolved, key))

    def _text_address(
        self, scope: str, key: str, context: ExecutionContext | None, last: int | None, before: int | None
    ) -> Address | Refusal:
        """``_read_address`` of a read of stored texts, its page arguments ``last`` and ``before`` checked first."""
        name = check_key(key)
        check_count(last, "last", optional=True)
        check_count(before, "before", optional=True)
        return self._read_address(scope, name, context)

    def load_window_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        max_tokens: int,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
    ) -> BufferResult:
        """The longest sendable suffix of a buffer within ``max_tokens`` (issue 28 §1; no resolution).

        Never a leading tool result, a call cut from its results or a reasoning part from
        its turn; system rows kept and counted unless ``keep_system`` is False; with
        ``first_role`` the first non-system row has it. ``counter`` counts one stored row
        (default: ``flowmem.core.tokens.estimate_tokens``, stored per row). ``window`` says
        what was cut. WindowTooSmallError (``window_too_small``, its ``needed`` tokens) when
        the newest turn alone does not fit: nothing is cut silently.
        """
        address = checked_address(scope, scope_id, key)
        budget = window_args(None, max_tokens, counter, first_role)
        assert budget is not None
        rows, cut = read_window(self.store, address, WindowAsk(budget, keep_system, first_role), counter)
        window = TokenWindow(budget, cut.tokens, cut.start, cut.cut_messages, cut.cut_tokens)
        return BufferResult(messages=rows, count=cut.total, resolved_scope_id=scope_id, window=window)

    def load_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
        include_archived: bool = False,
    ) -> BufferResult:
        """Load a buffer at an explicit scope id (trusted callers; no resolution)."""
        window = _load_budget(last, max_tokens, counter, first_role, include_archived)
        if window is not None:
            return self.load_window_raw(scope, scope_id, key, window, counter, keep_system, first_role)
        address = checked_address(scope, scope_id, key)
        tail = check_count(last, "last", optional=True)
        if include_archived:
            return self._with_archive(address, tail)
        rows = self.store.load(address, tail)
        count = len(rows) if tail is None else self.store.count(address)
        return BufferResult(messages=rows, count=count, resolved_scope_id=scope_id)

    def iter_load(
        self, scope: str, key: str, context: ExecutionContext | None, batch: int = 1000
    ) -> BufferRows:
        """Return the buffer's rows as an iterator that reads ``batch`` rows at a time.

        For buffers too large to hold as one list (``load`` builds it): memory stays
        one batch plus what the caller keeps. The rows are one snapshot of the buffer.
        A refusal returns the empty iterator with the refusal (MEM-7).
        """
        name = check_key(key)
        check_batch(batch)
        address = self._read_address(scope, name, context)
        if isinstance(address, Refusal):
            return BufferRows(refusal=address)
        return BufferRows(self.store.iter_rows(address, batch), address.scope_id)

    def load_page(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int,
        before: int | None = None,
    ) -> BufferPage:
        """Return at most ``last`` rows of a buffer: the newest ones below cursor ``before``.

        Pass the result's ``next_before`` as ``before`` to read the older page; the
        rows of a page are in buffer order. A refusal returns the empty page (MEM-7).
        """
        text = self.load_text(scope, key, context, last=last, before=before)
        rows: list[Message] = json.loads("[" + ",".join(text.bodies) + "]")
        return BufferPage(rows, text.count, text.next_before, text.resolved_scope_id, text.refusal)

    def first_page(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        last: int | None = None,
        before: int | None = None,
    ) -> PagedText:
        """The first page of a read ``load_text`` would answer, in one snapshot of the store.

        For callers that stream a buffer (the HTTP API): a reader holds one page
        (``Store.page_bodies``: at most 512 rows, about 256 KiB of JSON), whatever the
        buffer's size. The next pages (``next_page``) are of the same snapshot or
        refused (BufferChangedError). A refusal returns no rows (MEM-7).
        """
        address = self._text_address(scope, key, context, last, before)
        if isinstance(address, Refusal):
            return PagedText(BufferText(refusal=address))
        page = self.store.page_bodies(address, last=last, before=before)
        next_before = page.bodies[0][0] if page.older and page.bodies else None
        text = BufferText([b for _, b in page.bodies], page.count, next_before, address.scope_id)
        after = page.bodies[-1][0] if page.bodies else None
        return PagedText(text, address, page.version, before, after, page.more)

    def read_segment(self, read: PagedRead, segment: Segment, after: int | None = None) -> BodyPage:
        """The page of a paged read's ``segment`` after cursor ``after`` (BufferChangedError when
        the buffer was written since the read began)."""
        return paged_reads.segment_page(self.store, read, segment, after)

    def next_page(self, paged: PagedText, after: int) -> BodyPage:
        """The page after cursor ``after`` of a read begun by ``first_page`` (BufferChangedError
        when the buffer was written since)."""
        if paged.address is None:
            return BodyPage(None, 0)
        return self.store.page_bodies(
            paged.address, after=after, before=paged.before, version=paged.version
        )

    def load_text(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        last: int | None = None,
        before: int | None = None,
    ) -> BufferText:
        """Return rows as their stored JSON texts: all, or the ``last`` N, below cursor ``before``.

        For callers that pass rows on as JSON (the HTTP API streams them) without
        building Python objects. With ``last``, ``next_before`` is the cursor of the
        older rows when there are any. A refusal returns no rows (MEM-7).
        """
        address = self._text_address(scope, key, context, last, before)
        if isinstance(address, Refusal):
            return BufferText(refusal=address)
        resolved = address.scope_id
        if last is None:
            found = self.store.load_bodies(address, None, before)
            count = len(found) if before is None else self.store.count(address)
            return BufferText([b for _, b in found], count, None, resolved)
        found = self.store.load_bodies(address, last + 1, before)
        older = len(found) > last
        if older:
            found = found[1:]
        next_before = found[0][0] if older and found else None
        return BufferText([b for _, b in found], self.store.count(address), next_before, resolved)
