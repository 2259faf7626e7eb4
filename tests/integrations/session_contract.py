"""The Agents SDK's documented ``Session`` contract, as scenarios any session can run.

Each scenario takes a fresh-session factory (``make(session_id, settings)``) and
returns a JSON-able result. ``test_session_contract.py`` runs every scenario on
the SDK's own ``SQLiteSession`` and on ``FlowmemSession`` (each backend) and
requires the same result, plus the scenario's own expectation. The contract is
the ``Session`` protocol's docstrings (``agents/memory/session.py``), the
``SessionSettings`` docs (``agents/memory/session_settings.py``) and what
``SQLiteSession`` does with them:

- ``get_items(limit=None)``: the history in chronological order; ``limit`` N
  gives the latest N, exactly, wherever the cut falls (the Runner itself drops an
  output left without its call); without ``limit``, ``session_settings.limit``
  applies; a negative limit is every item, ``0`` none.
- ``add_items(items)``: appends, in order, across calls; ``[]`` changes nothing.
- ``pop_item()``: removes and returns the most recent item; ``None`` when empty.
- ``clear_session()``: removes every item of this session, none of another.
- items come back as they were added (JSON-equal), of every item type, where
  they were added (a system message mid-history stays there).
- ``close()``: every later call raises ``RuntimeError``, ``add_items([])`` too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from agents.memory.session_settings import SessionSettings

from flowmem.integrations.openai_agents import FlowmemRunHooks, FlowmemSession

Make = Callable[[str, "SessionSettings | dict[str, Any] | None"], Any]
Scenario = Callable[[Make], Awaitable[Any]]

USER = {"role": "user", "content": "What is the weather in Lisbon?"}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look it up."}],
    "encrypted_content": "gAAAAABo-opaque",
}
SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "Lisbon weather"},
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": '{"city":"Lisbon"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
ANSWER = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [
        {
            "type": "output_text",
            "text": "18C and sunny.",
            "annotations": [
                {
                    "type": "url_citation",
                    "start_index": 0,
                    "end_index": 3,
                    "url": "https://weather.example/lisbon",
                    "title": "Lisbon",
                }
            ],
        }
    ],
}
PICTURE = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": "And this?"},
        {"type": "input_image", "image_url": "https://x.example/sky.png", "detail": "low"},
    ],
}
SHORT = {"role": "assistant", "content": "Cloudy."}
HISTORY = [USER, REASONING, SEARCH, CALL, OUTPUT, ANSWER, PICTURE, SHORT]
"""A sendable history with one item of each common kind, as the SDK stores them."""


def hooks_of(session: Any) -> FlowmemRunHooks | None:
    """The documented run hooks of a ``FlowmemSession``; none for the SDK's own sessions."""
    return FlowmemRunHooks(session) if isinstance(session, FlowmemSession) else None


def as_json(value: Any) -> Any:
    """Return ``value`` as JSON would give it back (what ``SQLiteSession`` returns)."""
    return json.loads(json.dumps(value))


async def empty_session_has_no_items(make: Make) -> Any:
    """A new session has no items, pops nothing, and clears without error."""
    session = make("empty", None)
    got = [await session.get_items(), await session.pop_item()]
    await session.clear_session()
    return [*got, await session.get_items()]


async def items_come_back_in_order_as_added(make: Make) -> Any:
    """``add_items`` in several calls; ``get_items`` returns every item, in order, as added."""
    session = make("order", None)
    await session.add_items(HISTORY[:1])
    await session.add_items(HISTORY[1:6])
    await session.add_items([])
    await session.add_items(HISTORY[6:])
    return as_json(await session.get_items())


async def limit_returns_the_latest_items(make: Make) -> Any:
    """``get_items(limit=N)``: the latest N in chronological order; more than stored is all."""
    session = make("limit", None)
    await session.add_items(HISTORY)
    return [as_json(await session.get_items(limit=n)) for n in (1, 2, 3, 100, 0, -1)]


async def limit_cuts_wherever_the_latest_n_begin(make: Make) -> Any:
    """``get_items(limit=N)`` is the latest N items even when the cut falls inside a tool turn."""
    session = make("limit-cut", None)
    await session.add_items(HISTORY)
    return [as_json(await session.get_items(limit=n)) for n in range(len(HISTORY) + 2)]


LATE_SYSTEM = {"role": "system", "content": "From now on, answer in French."}


async def a_system_item_stays_where_it_was_added(make: Make) -> Any:
    """A system message added mid-history reads back at its place (Responses takes it there)."""
    session = make("late-system", None)
    await session.add_items([USER, SHORT, LATE_SYSTEM, PICTURE])
    return [as_json(await session.get_items()), as_json(await session.get_items(limit=2))]


async def a_closed_session_refuses_every_call(make: Make) -> Any:
    """After ``close()``, each call raises ``RuntimeError`` (an empty ``add_items`` too); closing again is fine."""
    session = make("closed", None)
    await session.add_items([USER])
    session.close()
    session.close()
    calls = {
        "add_items([])": lambda: session.add_items([]),
        "add_items": lambda: session.add_items([SHORT]),
        "get_items": session.get_items,
        "get_items(limit=1)": lambda: session.get_items(limit=1),
        "pop_item": session.pop_item,
        "clear_session": session.clear_session,
    }
    raised = {}
    for name, call in calls.items():
        try:
            await call()
        except RuntimeError as exc:
            raised[name] = type(exc).__name__ + (": closed" if "closed" in str(exc) else "")
        else:
            raised[name] = "returned"
    return raised


async def settings_limit_is_the_default_limit(make: Make) -> Any:
    """``session_settings.limit`` applies when ``get_items`` gets no limit; an explicit one wins."""
    typed = make("settings-typed", SessionSettings(limit=2))
    mapping = make("settings-dict", {"limit": 3})
    for session in (typed, mapping):
        await session.add_items(HISTORY)
    return [
        as_json(await typed.get_items()),
        as_json(await typed.get_items(limit=1)),
        as_json(await mapping.get_items()),
        typed.session_settings.limit,
        mapping.session_settings.limit,
        make("settings-none", None).session_settings.limit,
    ]


async def pop_item_returns_the_most_recent_item(make: Make) -> Any:
    """``pop_item`` removes and returns the newest item, down to ``None``."""
    session = make("pop", None)
    await session.add_items(HISTORY)
    popped = [await session.pop_item() for _ in range(len(HISTORY) + 1)]
    return [as_json(popped), as_json(await session.get_items())]


async def pop_then_add_restores_the_history(make: Make) -> Any:
    """What the SDK's rewind does: pop the tail, add it back, get the same history."""
    session = make("rewind", None)
    await session.add_items(HISTORY)
    tail = [await session.pop_item() for _ in range(4)]
    await session.add_items(list(reversed(tail)))
    return as_json(await session.get_items())


async def clear_session_removes_only_this_session(make: Make) -> Any:
    """``clear_session`` empties its session; another session id keeps its items."""
    first, second = make("clear-a", None), make("clear-b", None)
    await first.add_items(HISTORY[:2])
    await second.add_items([SHORT])
    await first.clear_session()
    after = [as_json(await first.get_items()), as_json(await second.get_items())]
    await first.add_items([USER])
    return [*after, as_json(await first.get_items())]


SCENARIOS: list[Scenario] = [
    empty_session_has_no_items,
    items_come_back_in_order_as_added,
    limit_returns_the_latest_items,
    limit_cuts_wherever_the_latest_n_begin,
    a_system_item_stays_where_it_was_added,
    a_closed_session_refuses_every_call,
    settings_limit_is_the_default_limit,
    pop_item_returns_the_most_recent_item,
    pop_then_add_restores_the_history,
    clear_session_removes_only_this_session,
]

EXPECTED: dict[str, Any] = {
    "empty_session_has_no_items": [[], None, []],
    "items_come_back_in_order_as_added": HISTORY,
    "limit_returns_the_latest_items": [
        HISTORY[-1:],
        HISTORY[-2:],
        HISTORY[-3:],
        HISTORY,
        [],
        HISTORY,
    ],
    "limit_cuts_wherever_the_latest_n_begin": [[]] + [HISTORY[-n:] for n in range(1, len(HISTORY) + 2)],
    "a_system_item_stays_where_it_was_added": [[USER, SHORT, LATE_SYSTEM, PICTURE], [LATE_SYSTEM, PICTURE]],
    "a_closed_session_refuses_every_call": {
        name: "RuntimeError: closed"
        for name in ("add_items([])", "add_items", "get_items", "get_items(limit=1)", "pop_item", "clear_session")
    },
    "settings_limit_is_the_default_limit": [HISTORY[-2:], HISTORY[-1:], HISTORY[-3:], 2, 3, None],
    "pop_item_returns_the_most_recent_item": [[*reversed(HISTORY), None], []],
    "pop_then_add_restores_the_history": HISTORY,
    "clear_session_removes_only_this_session": [[], [SHORT], [USER]],
}
"""What the contract says each scenario returns (both sessions must also agree)."""
