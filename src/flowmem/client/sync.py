# Generated from src/flowmem/client/aio.py by scripts/async_to_sync.py: do not edit.
# Change aio.py, then run `python scripts/async_to_sync.py` (`make lint` fails while this file is stale).
"""``Client``: flowmem over HTTP, synchronous (one pooled ``httpx.Client`` per instance)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from flowmem.client.base import Request, http_options
from flowmem.client.binding import SyncBase
from flowmem.client.calls import Call
from flowmem.client.memory_methods import MemoryMethods
from flowmem.client.methods import ApiMethods
from flowmem.client.steps import Awaited, Done, Pages, Steps, Wait, Work, advance, exchange
from flowmem.memory import Memory

T = TypeVar("T")


class Client(SyncBase, ApiMethods, MemoryMethods):
    """A flowmem server's API; implements ``flowmem.memory.Memory``.

    Made with ``binding.Base``'s arguments (``base_url``, ``token``, ``timeout``,
    ``retry``, ``max_connections``, ``headers``, ``transport``). Use it as a context
    manager (``with``), or ``close()`` it.
    """

    def _open(self, transport: httpx.BaseTransport | None) -> httpx.Client:
        return httpx.Client(transport=transport, **http_options(self.settings))

    def close(self) -> None:
        """Close the connection pool (the client cannot be used afterwards)."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *raised: object) -> None:
        self.close()

    def call(self, call: Call[T], *, idempotency_key: str | None = None) -> T:
        """Send ``call``, retrying under the policy; return its answer or raise its error.

        A write is sent with ``idempotency_key`` (checked before anything is sent), else
        with a fresh random key; every retry of it carries the same key.
        """
        return self._run(exchange(call.keyed(idempotency_key), self.settings))

    def user_id(self) -> str:
        """The user id the token acts as (``""`` for a service token); asked once, then kept."""
        return self._run(self._identity.steps(self.settings))

    # --- performing the steps -----------------------------------------------------------
    def _run(self, steps: Steps[T]) -> T:
        """Perform ``steps`` one by one, each outcome sent back in, until they end."""
        step = advance(steps)
        while not isinstance(step, Done):
            step = advance(steps, self._perform(step))
        return step.value

    def _perform(self, step: Request | Wait | Awaited) -> Any:
        """A request's response (or its transport error); nothing after a wait; an awaitable's value."""
        if isinstance(step, Wait):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Awaited):
            return step.value
        try:
            return self._http.send(step.built(self._http))
        except httpx.TransportError as exc:
            return exc

    @staticmethod
    def _method(build: Callable[..., Work[Any]]) -> Callable[..., Any]:
        """A declared method (``binding.Declared``) on this client: the steps of its work, performed."""

        def method(self: Client, *args: Any, **kwargs: Any) -> Any:
            return self._run(self._steps(build(*args, **kwargs)))

        return method

    @staticmethod
    def _pages(build: Callable[..., Pages[Any]]) -> Callable[..., Iterator[Any]]:
        """A declared listing (``binding.Paged``) on this client: its items, fetched a page at a time."""

        def listing(self: Client, *args: Any, **kwargs: Any) -> Iterator[Any]:
            pages = build(*args, **kwargs)
            call: Call[Any] | None = pages.first
            while call is not None:
                page = self.call(call)
                yield from page.data
                call = pages.after(page)

        return listing


if TYPE_CHECKING:  # mypy checks that ``Client`` has every operation of ``Memory``
    _implements_the_protocol: type[Memory] = Client
