"""The record value of a ``FlowmemStore`` item: ``{"format": "langgraph.store/1", "value": …, …}``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from flowmem.integrations.langgraph.namespaces import FORMAT


def timestamp(seconds: float) -> datetime:
    """An item's time (epoch seconds of the service's clock) as LangGraph's aware datetime."""
    return datetime.fromtimestamp(seconds, tz=UTC)


def is_number(value: object) -> TypeGuard[float]:
    """True for an int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Envelope:
    """An item as its record holds it: value, creation and update times, TTL in minutes."""

    value: dict[str, Any]
    created_at: float
    updated_at: float
    ttl: float | None

    @classmethod
    def of(cls, stored: Any) -> Envelope | None:
        """The envelope of a record value; None when the value is not a LangGraph item."""
        if not isinstance(stored, dict) or stored.get("format") != FORMAT:
            return None
        value, created, updated = (
            stored.get("value"),
            stored.get("created_at"),
            stored.get("updated_at"),
        )
        ttl = stored.get("ttl_minutes")
        if not isinstance(value, dict) or not is_number(created) or not is_number(updated):
            return None
        if ttl is not None and not is_number(ttl):
            return None
        return cls(value, float(created), float(updated), None if ttl is None else float(ttl))

    def stored(self) -> dict[str, Any]:
        """The record value of this envelope."""
        return {
            "format": FORMAT,
            "value": self.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ttl_minutes": self.ttl,
        }
