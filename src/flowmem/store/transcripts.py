"""A page of a session's transcript, asked for the same way on every back-end: ``TranscriptPages``.

``Store.list_transcript`` takes sequence cursors (``since``, ``before``: both
excluded, either absent) and a page size; ``TranscriptPages`` checks the size and
turns the cursors into the bounds each back-end's ``_transcript_page`` reads between.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from flowmem.store.base import TranscriptMessage
from flowmem.store.rows import check_page

SEQ_MAX = 9223372036854775807  # the largest transcript sequence number (64-bit)


class TranscriptPages(ABC):
    """``Store.list_transcript`` written once, over each back-end's ``_transcript_page``."""

    def list_transcript(
        self,
        session_id: str,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """Return a page of transcript rows by sequence cursor and whether more exist."""
        check_page(limit)
        low = -1 if since is None else since
        high = SEQ_MAX if before is None else before
        return self._transcript_page(session_id, low, high, limit, newest_first)

    @abstractmethod
    def _transcript_page(
        self, session_id: str, low: int, high: int, limit: int, newest_first: bool
    ) -> tuple[list[TranscriptMessage], bool]:
        """At most ``limit`` rows numbered above ``low`` and below ``high``, in order or newest first; and whether more exist."""


__all__ = ["SEQ_MAX", "TranscriptPages"]
