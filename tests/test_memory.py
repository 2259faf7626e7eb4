"""``flowmem.memory``: the seven operations declared once, and every implementation held to them.

``Memory`` and ``AsyncMemory`` are written by hand (a type checker reads them);
``InThread`` is made from ``AsyncMemory`` (decision 0060). ``MemoryService``,
``Client``, ``AsyncClient`` and ``InThread`` each take an operation's parameters as
the protocol declares them, in order, with the same defaults and result, and may
add keyword-only parameters of their own (a key, a guard) after them.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from typing import Any

import pytest

from flowmem.client import AsyncClient, Client
from flowmem.integrations import InThread, async_memory_of
from flowmem.memory import OPERATIONS, AsyncMemory, Memory
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore

IMPLEMENTATIONS: list[tuple[type, type]] = [
    (MemoryService, Memory),
    (Client, Memory),
    (AsyncClient, AsyncMemory),
    (InThread, AsyncMemory),
]


def _declared(protocol: type, op: str) -> inspect.Signature:
    return inspect.signature(getattr(protocol, op))


@pytest.mark.parametrize(("cls", "protocol"), IMPLEMENTATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("op", OPERATIONS)
def test_an_implementation_takes_the_protocols_parameters_then_keyword_extras(
    cls: type, protocol: type, op: str
) -> None:
    declared, own = _declared(protocol, op), inspect.signature(getattr(cls, op))
    params = list(own.parameters.values())
    wanted = list(declared.parameters.values())
    assert params[: len(wanted)] == wanted, (cls.__name__, op)
    extras = params[len(wanted) :]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in extras), extras
    # a call in the protocol's form answers what the protocol says: an implementation typed by
    # overloads (``MemoryService.load``'s ``paged``) declares it in its first, the default one
    overloads = typing.get_overloads(getattr(cls, op))
    returns = inspect.signature(overloads[0]).return_annotation if overloads else own.return_annotation
    assert returns == declared.return_annotation
    assert inspect.iscoroutinefunction(getattr(cls, op)) is (protocol is AsyncMemory)


def test_in_thread_has_no_operation_the_protocol_lacks() -> None:
    mine = {name for name in vars(InThread) if not name.startswith("_")}
    assert mine == set(OPERATIONS)
    for op in OPERATIONS:
        assert getattr(InThread, op).__doc__ == f"``Memory.{op}`` in a worker thread."


def test_in_thread_answers_what_the_memory_answers_each_operation() -> None:
    context = ExecutionContext(user_id="alice")
    plain = MemoryService(MemoryStore(), clock=lambda: 1.0)
    awaited = async_memory_of(MemoryService(MemoryStore(), clock=lambda: 1.0), "test")
    assert isinstance(awaited, InThread) and isinstance(awaited, AsyncMemory)
    user = {"role": "user", "content": "hi"}
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("append", ("user", "chat", [user], context, 5), {"return_messages": True}),
        ("load", ("user", "chat", context), {"last": 1}),
        ("pop_last", ("user", "chat", context), {}),
        ("append", ("user", "chat", [user], context), {}),
        ("clear", ("user", "chat", context), {}),
        ("write", ("user", "k", {"v": 1}, context), {"ttl": 60}),
        ("read", ("user", "k", context), {}),
        ("read", ("user", "gone", context, 7), {}),
        ("delete", ("user", "k", context), {}),
        ("load", ("session", "chat", None), {}),  # a refusal (MEM-7)
    ]

    async def run() -> list[Any]:
        return [await getattr(awaited, op)(*args, **kwargs) for op, args, kwargs in calls]

    expected = [getattr(plain, op)(*args, **kwargs) for op, args, kwargs in calls]
    assert asyncio.run(run()) == expected
