"""The session settings of ``FlowmemSession``: the SDK's ``SessionSettings`` with a token budget."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from agents.memory.session_settings import SessionSettings, coerce_session_settings
from pydantic.dataclasses import dataclass


@dataclass
class FlowmemSessionSettings(SessionSettings):
    """The SDK's ``SessionSettings`` with a token budget: ``max_tokens`` (issue 28).

    With it, ``get_items`` returns the longest sendable suffix of the history within
    that many tokens (flowmem's default counter): a call never without its output, a
    reasoning item never without its turn; ``limit``, when set too, then keeps the
    last ``limit`` items of that window.
    """

    max_tokens: int | None = None
    """Token budget of ``get_items``; None: no budget."""

    def resolve(self, override: SessionSettings | dict[str, Any] | None) -> SessionSettings:
        """The SDK's overlay, also of a plain ``SessionSettings`` (a ``RunConfig``'s): its set fields."""
        if isinstance(override, SessionSettings) and not isinstance(override, FlowmemSessionSettings):
            override = {f.name: getattr(override, f.name) for f in fields(override) if getattr(override, f.name) is not None}
        return super().resolve(override)


def session_settings_of(value: SessionSettings | dict[str, Any] | None) -> FlowmemSessionSettings:
    """``value`` as ``FlowmemSessionSettings`` (a dict of its fields, or the SDK's settings).

    As the SDK's own sessions take it (``coerce_session_settings``): a dict naming a
    field that does not exist raises ``TypeError: Unknown session settings: <names>``,
    which also lists the fields there are; a value that is neither settings nor a dict
    raises ``TypeError``; a field of the wrong type raises pydantic's ``ValidationError``.
    """
    if isinstance(value, FlowmemSessionSettings):
        return value
    if value is None:
        return FlowmemSessionSettings()
    if isinstance(value, dict):
        known = {f.name for f in fields(FlowmemSessionSettings) if f.init}
        unknown = sorted(str(name) for name in value if name not in known)
        if unknown:
            raise TypeError(
                f"Unknown session settings: {', '.join(unknown)} "
                f"(a FlowmemSession takes {', '.join(sorted(known))})"
            )
        return FlowmemSessionSettings(**value)
    return FlowmemSessionSettings(limit=coerce_session_settings(value).limit)
