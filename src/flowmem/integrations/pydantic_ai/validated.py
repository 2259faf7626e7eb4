"""The histories a store validated, kept as pickled copies so a load validates only what is new (decision 0141).

A load of a line kept whole reads every message's JSON (decision 0131) and validated
all of it, turn after turn, though only the last turn's messages were new.
``Validated`` is ``integrations.copies.KeptCopies`` for pydantic-ai's messages: per
history (keyed by its first entry id), the messages it validated as segments, a load
unpickling the segments whose entry ids and JSON texts are exactly the ones read now
and validating the rest in one ``ModelMessagesTypeAdapter.validate_json``. A save adds
the messages it wrote after a kept history as a segment too, when it validated each
from the very text it stored (``extend``, decision 0145): the next load then validates
nothing. Requests with equal ``instructions`` share one string again across segments,
as one ``validate_json`` shares them. Segments read again are copied by a plan instead
of unpickled (``copies.planned``, decision 0176; ``plans=False``: always pickled).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest

from flowmem.integrations.copies import MAX_BYTES, MAX_SEGMENTS, KeptCopies


def _share_instructions(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Point requests with equal ``instructions`` at one string, as ``ModelMessagesTypeAdapter`` does."""
    shared: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelRequest) and message.instructions is not None:
            message.instructions = shared.setdefault(message.instructions, message.instructions)
    return messages


def _validate(texts: Sequence[str]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(texts) + "]")


class Validated(KeptCopies[ModelMessage]):
    """The histories this store validated, per first entry id, as pickled segments (at most ``max_bytes``)."""

    def __init__(self, max_bytes: int = MAX_BYTES, plans: bool = True) -> None:
        super().__init__(_validate, _share_instructions, max_bytes, plans)

    def messages(
        self, chosen: Sequence[tuple[str, str]], proof: object | None = None
    ) -> list[ModelMessage]:
        """The messages of ``chosen`` (entry id and JSON text, oldest first), as ``validate_json`` gives them.

        ``proof``: the line state they were read at (``objects``, decision 0183).
        """
        return self.objects(chosen, proof)


__all__ = ["MAX_BYTES", "MAX_SEGMENTS", "Validated"]
