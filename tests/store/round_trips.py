"""A psycopg connection's round trips, counted: the waits that blocked on reading the server's answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.waiting import Wait


def count_round_trips(conn: Any, counted: Callable[[], None]) -> None:
    """Call ``counted`` once for each wait of ``conn`` that blocks reading (one per round trip)."""
    wait = conn.wait

    def counting(gen: Any, *args: Any, **kwargs: Any) -> Any:
        def wrapped() -> Any:
            blocked = False
            try:
                state = next(gen)
                while True:
                    if state == Wait.R and not blocked:
                        blocked = True
                        counted()
                    state = gen.send((yield state))
            except StopIteration as done:
                return done.value

        return wait(wrapped(), *args, **kwargs)

    conn.wait = counting
