# sync: """``Client``: flowmem over HTTP, synchronous (one pooled ``httpx.Client`` per instance)."""
"""``AsyncClient``: flowmem over HTTP for asyncio (one pooled ``httpx.AsyncClient`` per instance).

Its methods are declared once for both clients (``flowmem.client.methods``,
``flowmem.client.memory_methods``) as the work they ask for, and what a request,
a retry or an operation of several calls is, is written once as steps
(``flowmem.client.steps``). This module only performs those steps: it sends each
request with its httpx client, sleeps between attempts and awaits what a caller's
function returned. ``flowmem.client.sync.Client`` is generated from it by
``scripts/async_to_sync.py`` (``make lint`` fails while ``sync.py`` is stale). A
``# async only`` comment leaves the statement below it out of ``sync.py``; ``# sync: …``
lines replace it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from flowmem.client.base import Request, http_options
from flowmem.client.binding import AsyncBase
from flowmem.client.calls import Call
from flowmem.client.memory_methods import MemoryMethods
from flowmem.client.methods import ApiMethods
from flowmem.client.steps import Awaited, Done, Pages, Steps, Wait, Work, advance, exchange
from flowmem.memory import AsyncMemory

T = TypeVar("T")


class AsyncClient(AsyncBase, ApiMethods, MemoryMethods):
    """A flowmem server's API; implements ``flowmem.memory.AsyncMemory``.

    Made with ``binding.Base``'s arguments (``base_url``, ``token``, ``timeout``,
    ``retry``, ``max_connections``, ``headers``, ``transport``). Use it as a context
    manager (``async with``), or ``await close()`` it.
    """

    def _open(self, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=transport, **http_options(self.settings))

    async def close(self) -> None:
        """Close the connection pool (the client cannot be used afterwards)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *raised: object) -> None:
        await self.close()

    async def call(self, call: Call[T], *, idempotency_key: str | None = None) -> T:
        """Send ``call``, retrying under the policy; return its answer or raise its error.

        A write is sent with ``idempotency_key`` (checked before anything is sent), else
        with a fresh random key; every retry of it carries the same key.
        """
        return await self._run(exchange(call.keyed(idempotency_key), self.settings))

    async def user_id(self) -> str:
        """The user id the token acts as (``""`` for a service token); asked once, then kept."""
        return await self._run(self._identity.steps(self.settings))

    # --- performing the steps -----------------------------------------------------------
    async def _run(self, steps: Steps[T]) -> T:
        """Perform ``steps`` one by one, each outcome sent back in, until they end."""
        step = advance(steps)
        while not isinstance(step, Done):
            step = advance(steps, await self._perform(step))
        return step.value

    async def _perform(self, step: Request | Wait | Awaited) -> Any:
        """A request's response (or its transport error); nothing after a wait; an awaitable's value."""
        if isinstance(step, Wait):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Awaited):
            # sync: return step.value
            return await step.value
        try:
            return await self._http.send(step.built(self._http))
        except httpx.TransportError as exc:
            return exc

    @staticmethod
    def _method(build: Callable[..., Work[Any]]) -> Callable[..., Any]:
        """A declared method (``binding.Declared``) on this client: the steps of its work, performed."""

        async def method(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
            return await self._run(self._steps(build(*args, **kwargs)))

        return method

    @staticmethod
    def _pages(build: Callable[..., Pages[Any]]) -> Callable[..., AsyncIterator[Any]]:
        """A declared listing (``binding.Paged``) on this client: its items, fetched a page at a time."""

        async def listing(self: AsyncClient, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            pages = build(*args, **kwargs)
            call: Call[Any] | None = pages.first
            while call is not None:
                page = await self.call(call)
                # sync: yield from page.data
                for item in page.data:
                    yield item
                call = pages.after(page)

        return listing


if TYPE_CHECKING:  # mypy checks that ``AsyncClient`` has every operation of ``AsyncMemory``
    _implements_the_protocol: type[AsyncMemory] = AsyncClient
