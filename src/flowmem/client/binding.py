"""How a method declared once is a method of ``AsyncClient`` (awaited) and of ``Client`` alike.

``flowmem.client.methods`` declares each method as a function of its parameters (no
``self``) that returns the work it asks for (``steps.Work``: a call, a planned memory
call, or steps of those), or the pages it reads (``steps.Pages``); ``Declared`` and
``Paged`` make that function a descriptor. Read on a client class, the descriptor is
the function the class makes of it (its ``_method`` or ``_pages``: an ``async def`` on
``AsyncClient``, a ``def`` on the generated ``Client``), named, documented and signed
as declared (``self`` first), so ``help``, ``inspect`` and mypy (the ``__get__``
overloads) see each client's own method. ``Base`` is what both clients are made of.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from types import MethodType
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx

from flowmem.client.base import DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT, Settings, settings
from flowmem.client.retry import RetryPolicy
from flowmem.client.steps import Identity, Pages, Steps, Work, expand

P = ParamSpec("P")
T = TypeVar("T")
Transport = TypeVar("Transport")
Http = TypeVar("Http")


class Base(Generic[Transport, Http]):
    """A client's settings, the user its token acts as (asked once) and its one connection pool.

    ``base_url`` defaults to ``$FLOWMEM_URL`` (else ``http://127.0.0.1:8765``) and
    ``token`` to ``$FLOWMEM_TOKEN``. ``timeout`` bounds each attempt in seconds
    (connecting at most 10 s); ``retry`` says which failures are tried again and how
    long to wait (``RetryPolicy``; ``RetryPolicy.never()`` for none); one connection
    pool of ``max_connections`` serves every call. ``transport`` replaces httpx's
    (tests, proxies; an ``httpx.AsyncBaseTransport`` for ``AsyncClient``).
    """

    settings: Settings
    _http: Http

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        headers: Mapping[str, str] | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.settings = settings(base_url, token, timeout, retry, max_connections, headers)
        self._identity = Identity()
        self._http = self._open(transport)

    def _open(self, transport: Transport | None) -> Http:
        """The httpx client (sync or async) every call of this client goes through."""
        raise NotImplementedError

    def _steps(self, work: Work[T]) -> Steps[T]:
        """``work`` as the requests and waits this client performs."""
        return expand(work, self.settings, self._identity)


class AsyncBase(Base[httpx.AsyncBaseTransport, httpx.AsyncClient]):
    """``AsyncClient``'s base: a declared method is awaited, a listing is an async iterator."""


class SyncBase(Base[httpx.BaseTransport, httpx.Client]):
    """``Client``'s base: a declared method returns its result, a listing is an iterator."""


class _Declaration:
    """A method declared once; ``maker`` names the client class's method that makes its function."""

    maker = "_method"

    def __init__(self, build: Callable[..., Any]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__
        self._made: dict[type, Callable[..., Any]] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _get(self, client: object | None, owner: type | None) -> Any:
        cls = owner if owner is not None else type(client)
        make = getattr(cls, self.maker, None)
        if make is None:  # read on the class that declares it
            return self
        function = self._made.get(cls)
        if function is None:
            function = self._made[cls] = self._named(make(self.build), cls)
        return function if client is None else MethodType(function, client)

    def _named(self, function: Callable[..., Any], cls: type) -> Callable[..., Any]:
        """``function`` with the declared name, docstring and signature (``self`` first)."""
        declared = inspect.signature(self.build)
        written = str(declared.return_annotation)
        result = match.group(1) if (match := re.fullmatch(r"\w+\[(.*)\]", written)) else written
        if inspect.isasyncgenfunction(function):
            result = f"AsyncIterator[{result}]"
        elif inspect.isgeneratorfunction(function):
            result = f"Iterator[{result}]"
        this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        function.__name__ = self.name
        function.__qualname__ = f"{cls.__qualname__}.{self.name}"
        function.__doc__ = self.build.__doc__
        function.__module__ = cls.__module__
        function.__signature__ = declared.replace(  # type: ignore[attr-defined]
            parameters=[this, *declared.parameters.values()], return_annotation=result
        )
        return function


class Declared(_Declaration, Generic[P, T]):
    """A client method declared as the work it asks for (``build``: its parameters -> ``Work``)."""

    def __init__(self, build: Callable[P, Work[T]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, client: None, owner: type) -> Callable[..., Any]: ...

    @overload
    def __get__(
        self, client: AsyncBase, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, client: SyncBase, owner: type | None = None) -> Callable[P, T]: ...

    def __get__(self, client: object | None, owner: type | None = None) -> Any:
        return self._get(client, owner)


class Paged(_Declaration, Generic[P, T]):
    """A listing declared as the pages it reads (``build``: its parameters -> ``Pages``)."""

    maker = "_pages"

    def __init__(self, build: Callable[P, Pages[T]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, client: None, owner: type) -> Callable[..., Any]: ...

    @overload
    def __get__(self, client: AsyncBase, owner: type | None = None) -> Callable[P, AsyncIterator[T]]: ...

    @overload
    def __get__(self, client: SyncBase, owner: type | None = None) -> Callable[P, Iterator[T]]: ...

    def __get__(self, client: object | None, owner: type | None = None) -> Any:
        return self._get(client, owner)


__all__ = ["AsyncBase", "Base", "Declared", "Paged", "SyncBase"]
