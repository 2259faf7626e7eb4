"""``client/binding.py``: a method declared once is each client's own method, awaited or not."""

from __future__ import annotations

import inspect

import httpx

from flowmem.client import AsyncClient, Client
from flowmem.client.binding import Declared
from flowmem.client.memory_methods import MemoryMethods
from flowmem.client.methods import ApiMethods


def _declared(kind: type) -> list[str]:
    return [name for name, value in vars(kind).items() if isinstance(value, Declared)]


def test_a_declared_method_is_a_coroutine_function_on_the_async_client_and_a_function_on_the_sync_one() -> None:
    names = _declared(ApiMethods) + _declared(MemoryMethods)
    assert {"health", "append_buffer", "read", "compact"} <= set(names)
    for name in names:
        awaited, plain = getattr(AsyncClient, name), getattr(Client, name)
        assert inspect.iscoroutinefunction(awaited) and not inspect.iscoroutinefunction(plain), name
        assert inspect.signature(awaited) == inspect.signature(plain), name
        assert next(iter(inspect.signature(plain).parameters)) == "self", name
        declaration = vars(ApiMethods).get(name) or vars(MemoryMethods)[name]
        assert awaited.__doc__ == plain.__doc__ == declaration.build.__doc__, name


def test_the_bound_method_has_the_declared_signature_and_result() -> None:
    with Client("http://flowmem.test", "t", transport=httpx.MockTransport(lambda r: httpx.Response(500))) as client:
        signature = inspect.signature(client.send_turn)
    assert list(signature.parameters) == ["session_id", "content", "wait", "idempotency_key"]
    assert signature.return_annotation == "TurnResult"
    assert inspect.signature(AsyncClient.iter_sessions).return_annotation == "AsyncIterator[Session]"
    assert inspect.signature(Client.iter_sessions).return_annotation == "Iterator[Session]"


def test_a_subclass_may_override_a_declared_method() -> None:
    class Quiet(Client):
        def health(self) -> str:  # type: ignore[override]
            return "quiet"

    with Quiet("http://flowmem.test", "t") as quiet:
        assert quiet.health() == "quiet"
        assert Quiet.store_health.__qualname__.endswith("Quiet.store_health")


def test_read_on_the_declaring_class_it_is_the_declaration() -> None:
    assert isinstance(vars(ApiMethods)["health"], Declared)
    assert isinstance(ApiMethods.__dict__["health"].__get__(None, ApiMethods), Declared)
