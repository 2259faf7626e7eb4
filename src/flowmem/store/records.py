"""A memory record's write, asked for the same way on every back-end: ``RecordWrites``.

``Store.put_record`` takes an address and a JSON value: ``RecordWrites`` checks the
address and turns the value into its stored JSON text (NotSerializableError,
nothing written, otherwise) before each back-end's ``_put_text`` writes it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from flowmem.store.base import Address, Idempotency, WriteGuard
from flowmem.store.rows import check_address, to_json


class RecordWrites(ABC):
    """``Store.put_record`` written once, over each back-end's ``_put_text``."""

    def put_record(
        self,
        address: Address,
        value: Any,
        expires_at: float | None,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        """Store a JSON value (NotSerializableError, nothing written, otherwise).

        With ``guard``, only if it holds (checked by the write itself); with
        ``idempotency``, the write and its key are one transaction.
        """
        check_address(address)
        self._put_text(address, to_json(value), expires_at, guard, idempotency)

    @abstractmethod
    def _put_text(
        self, address: Address, text: str, expires_at: float | None, guard: WriteGuard | None,
        idempotency: Idempotency | None,
    ) -> None:
        """Store the record's JSON ``text`` at ``address`` (``RecordWrites.put_record``)."""


__all__ = ["RecordWrites"]
