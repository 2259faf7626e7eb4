"""Round trips a psycopg client makes, counted: the times it blocked reading the server's answer.

``counting()`` wraps psycopg's ``waiting.wait`` (what every ``Connection.wait`` calls)
while it is active: a wait whose generator asks to read counts once, however many
reads it then takes. The same measure as tests/store/round_trips.py (one connection).
Load-independent, unlike a time: the benches report it beside their timings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Counter:
    """Round trips counted since it was made."""

    def __init__(self) -> None:
        self.trips = 0


@contextlib.contextmanager
def counting() -> Iterator[Counter]:
    """Count every psycopg connection's round trips inside the block."""
    import psycopg.waiting as waiting
    from psycopg.waiting import Wait

    counter = Counter()
    original = waiting.wait

    def wait(gen: Any, *args: Any, **kwargs: Any) -> Any:
        def wrapped() -> Any:
            blocked = False
            try:
                state = next(gen)
                while True:
                    if state == Wait.R and not blocked:
                        blocked = True
                        counter.trips += 1
                    state = gen.send((yield state))
            except StopIteration as done:
                return done.value

        return original(wrapped(), *args, **kwargs)

    waiting.wait = wait
    try:
        yield counter
    finally:
        waiting.wait = original
