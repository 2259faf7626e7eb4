"""The ASGI application: ``create_app`` wires store → services → routes → middleware."""

from __future__ import annotations

import asyncio
import gc
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from types import ModuleType
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from starlette.routing import Route

from flowmem import __version__
from flowmem.api.errors import install_error_handlers, recent_store_fault, server_error_response
from flowmem.api.gate import BODY_TIMEOUT, GateMiddleware
from flowmem.api.logs import RequestLogMiddleware
from flowmem.api.lookup import TOKEN_CACHE_SIZE, TOKEN_CACHE_TTL, LookupCache
from flowmem.api.metrics import (
    METRICS_ENV,
    PrometheusSink,
    metrics_router,
    tracing_from_env,
)
from flowmem.api.models import Health
from flowmem.api.pool import StorePool
from flowmem.api.purge import PURGE_INTERVAL, purge_expired_forever
from flowmem.api.ratelimit import RateLimitMiddleware, RateLimits
from flowmem.api.routes import (
    compaction,
    inspector,
    listing,
    memory,
    repairs,
    sessions,
    stateless,
    users,
    vectors,
)
from flowmem.api.routes.common import errors
from flowmem.api.services import Services
from flowmem.errors import ConfigurationError, StoreError
from flowmem.limits import Limits
from flowmem.metrics import install as install_metrics
from flowmem.service import MemoryService
from flowmem.sessions import SessionService, TurnRunner
from flowmem.store import DEFAULT_LOCK_TIMEOUT, Address, Store, open_store
from flowmem.ui import install_ui

DATABASE_ENV = "FLOWMEM_DATABASE_URL"
MCP_PATH = "/mcp"
CONCURRENCY_ENV = "FLOWMEM_STORE_CONCURRENCY"
INLINE_ENV = "FLOWMEM_INLINE_STORE"
BODY_TIMEOUT_ENV = "FLOWMEM_BODY_TIMEOUT"
TOKEN_CACHE_TTL_ENV = "FLOWMEM_TOKEN_CACHE_TTL"

DESCRIPTION = """Conversation memory over HTTP: sessions with owners, conversation
buffers and memory records under the FlowDrop GR-MEM rules.

Every route except `/health`, `/openapi.json` and `/docs` needs
`Authorization: Bearer <token>` (create one with `flowmem token create`).
Refusals are `{"error": {"code", "message"}}`."""


# written and read back by /health/store; expires a day after the last probe
HEALTH_PROBE = Address("global", "", "__flowmem_health__")
HEALTH_PROBE_TTL = 86400.0


def probe_store(store: Store, now: float) -> None:
    """Readiness: write one small record and read it back; the store's typed error if it fails."""
    store.put_record(HEALTH_PROBE, {"checked_at": now}, now + HEALTH_PROBE_TTL)
    found, _ = store.get_record(HEALTH_PROBE, now)
    if not found:
        raise StoreError("the health record just written could not be read back")


# The API's routers, in the order a request is matched against them: the memory routes
# first (the hot path), the others after.
ROUTERS: tuple[APIRouter, ...] = (
    memory.router,
    compaction.router,
    repairs.router,
    sessions.router,
    stateless.router,
    users.router,
    inspector.router,
    listing.router,
    vectors.writes,
    vectors.searches,
)


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Serve ``router``'s routes in ``app`` as they are: built once per process, shared by every app.

    An ``APIRoute`` builds its state when it is declared (at import): the endpoint's
    dependencies, body and response fields, each a pydantic ``TypeAdapter``.
    ``app.include_router`` would build all of it again for each app, on the app's first
    request (FastAPI 0.16x), ~280 pydantic ``TypeAdapter`` objects and ~60 ms of CPU per app
    (decision 0149). What a route holds is read-only and the same for every app: a
    request finds its app's store, limits and tokens in ``request.app.state`` and the
    middleware, never in the route. A router given here has no prefix, tags,
    dependencies or lifespan of its own to apply (its routes carry their paths and
    tags); ``app.dependency_overrides`` does not reach these routes.
    """
    if router.dependencies or router.on_startup or router.on_shutdown or router.callbacks:
        raise ConfigurationError("add_routes takes a router whose routes carry all it applies")
    app.router.routes.extend(router.routes)


def create_app(
    store: Store | None = None,
    *,
    database_url: str | None = None,
    runner: TurnRunner | None = None,
    runner_factory: Callable[[Store, MemoryService], TurnRunner | None] | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    clock: Callable[[], float] | None = None,
    store_concurrency: int | None = None,
    inline_store: bool = True,
    freeze_gc: bool = False,
    purge_interval: float | None = PURGE_INTERVAL,
    limits: Limits | None = None,
    rate_limits: RateLimits | None = None,
    body_timeout: float | None = BODY_TIMEOUT,
    token_cache_ttl: float = TOKEN_CACHE_TTL,
    metrics: bool = False,
) -> FastAPI:
    """Build the API over ``store`` (or the store at ``database_url`` / ``$FLOWMEM_DATABASE_URL``).

    A store the app opened itself is closed at shutdown. ``runner`` (or
    ``runner_factory(store, memory)``) runs model turns; without one a turn only
    records the user message. The runner ``runner_factory`` built is closed at
    shutdown, before the store (its ``close()``: its turns stopped, its models' HTTP
    clients closed); a ``runner`` given stays open, its owner's to close.
    With ``inline_store`` (the default) the memory and
    buffer routes make their store call on the event loop when the store's calls
    have the ``LocalCalls`` capability (SQLite, memory); see ``flowmem.api.fast``.
    ``freeze_gc`` (what ``flowmem serve`` uses) moves every object alive at startup
    out of the garbage collector's reach (``gc.freeze``): a full collection then
    scans only what requests created, and its pause fell from 70-100 ms (the
    bench's p99) to 3-9 ms. Off by default: a process that builds many apps (a
    test suite) would keep each one's startup garbage forever.
    Every ``purge_interval`` seconds (None: never) expired memory records are
    deleted in the background (``flowmem.api.purge``).
    ``limits`` bounds what one write may store and one user keep (its quotas, which the
    memory service gives the store) and ``rate_limits`` how fast one token or one peer
    may call (``flowmem.limits``, ``flowmem.api.ratelimit``; None: ``Limits.from_env()``,
    as every ``MemoryService`` reads them, and the documented rate limits;
    ``RateLimits.off()`` / ``Limits.unlimited()`` turn them off).
    A request body must arrive within ``body_timeout`` seconds (408; None: no bound).
    A memory read may be answered for a token up to ``token_cache_ttl`` seconds
    after it was last looked up (a revocation by another process counts from then;
    0: every request looks its token up; decision 0034).
    With ``metrics`` the app counts what it does and serves ``GET /metrics`` to a
    token with ``metrics:read`` (``flowmem.api.metrics``, docs/metrics.md; off by
    default, on in ``flowmem serve``).
    """
    if purge_interval is not None and (
        isinstance(purge_interval, bool)
        or not isinstance(purge_interval, int | float)
        or not purge_interval > 0
    ):
        raise ConfigurationError(
            f"purge_interval must be > 0 seconds or None, got {purge_interval!r}"
        )
    owned = store is None
    if store is None:
        url = database_url or os.environ.get(DATABASE_ENV)
        if not url:
            raise ConfigurationError(f"create_app needs a store, a database_url or ${DATABASE_ENV}")
        store = open_store(url)
    extra: dict[str, Any] = {} if clock is None else {"clock": clock}
    # the service gives the per-user quotas to the store, which counts them in each write
    memory_service = MemoryService(store, lock_timeout=lock_timeout, limits=limits, **extra)
    built: TurnRunner | None = None  # the runner the app made, closed at shutdown (a given one is not)
    if runner is None and runner_factory is not None:
        runner = built = runner_factory(store, memory_service)
    session_service = SessionService(store, memory_service, runner, **extra)
    services = Services(
        store=store,
        memory=memory_service,
        sessions=session_service,
        pool=StorePool(store_concurrency, inline=inline_store, store=store),
        tokens=LookupCache(token_cache_ttl, TOKEN_CACHE_SIZE),
    )

    mcp = mcp_endpoint(services)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if freeze_gc:
            gc.collect()
            gc.freeze()
        purging = None
        if purge_interval is not None:
            purge = purge_expired_forever(services.pool, store, clock or time.time, purge_interval)
            purging = asyncio.create_task(purge)
        async with AsyncExitStack() as serving:
            if mcp is not None:  # /mcp's session manager runs in it once a request starts it
                await serving.enter_async_context(mcp.running())
            yield
        if purging is not None:
            purging.cancel()
            with suppress(asyncio.CancelledError):
                await purging
        await _close_runner(built)
        services.pool.close()  # store work already started finishes before the store closes
        if sink is not None:
            sink.close()
        if owned:
            store.close()

    app = FastAPI(
        title="flowmem",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,  # no 307 built from the client's Host header: 404 (decision 0013)
        docs_url=None,  # install_ui serves /docs from the package's files (offline)
        redoc_url=None,  # no /redoc: FastAPI's page loads a CDN script and fonts (decision 0105)
    )
    app.state.services = services
    install_error_handlers(app)
    sink = PrometheusSink(store) if metrics else None
    if sink is not None:
        install_metrics(sink)

    @app.get("/health", response_model=Health, tags=["health"])
    async def health() -> dict[str, Any]:
        """Liveness: the server answers (the store is not asked). No token needed."""
        return {"status": "ok", "version": __version__}

    for router in ROUTERS:  # the memory routes first: the hot path, matched before the others
        add_routes(app, router)
    install_ui(app)  # /ui, /docs offline, / -> /ui
    if sink is not None:
        app.include_router(metrics_router(sink))

    if mcp is not None:  # the MCP tools over streamable HTTP, behind the same gate (docs/mcp.md)
        app.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))
    # after the routers: every route before the memory ones is one more match per append
    @app.get("/health/store", response_model=Health, tags=["health"], responses=errors(503, 507))
    async def store_health() -> dict[str, Any] | JSONResponse:
        """Readiness: the store takes a write and reads it back. No token needed.

        503 with the cause's code when it does not (`store_unavailable`,
        `store_read_only`, `store_corrupt`, `store_error`), 507 `store_full` when
        the disk is full. A full or read-only store that any request met in the
        last 60 s fails it too, and a damaged one until the server restarts.
        """
        fault = recent_store_fault(app)
        if fault is not None:
            return server_error_response(fault)
        # a failure is answered, and remembered like any request's, by the error handler
        await services.pool.in_thread(probe_store, store, (clock or time.time)())
        return {"status": "ok", "version": __version__}

    app.add_middleware(GateMiddleware, services=services, body_timeout=body_timeout)
    # outside the gate: a request over its rate is refused before its token is looked up
    app.add_middleware(RateLimitMiddleware, limits=rate_limits)
    # outermost: a request refused by any layer is logged, and counted, too
    app.add_middleware(RequestLogMiddleware, count=sink is not None)
    return app


def mcp_endpoint(services: Services) -> Any:
    """The ``/mcp`` endpoint over the app's services, or None when the ``mcp`` package is not installed.

    Its tools act as the principal the request gate found for the Bearer token, and
    run their store work in the app's store threads (``flowmem.mcp.http``). The SDK is
    imported by the first request to ``/mcp`` (``flowmem.mcp.on_demand``, decision 0157).
    """
    from flowmem.mcp.caller import Services as ToolServices
    from flowmem.mcp.on_demand import OnDemandMCP, sdk_installed

    if not sdk_installed():
        return None
    return OnDemandMCP(ToolServices(services.memory, services.sessions), services.pool.in_thread)


async def _close_runner(runner: object) -> None:
    """Close a runner the app built, if it has a ``close()`` (``AgentRunner``: its turns, then its models' clients)."""
    closing = getattr(runner, "close", None)
    if callable(closing):
        await asyncio.to_thread(closing)


def runtime_runner(store: Store, memory: MemoryService) -> TurnRunner | None:
    """The agent runner configured by the environment (``flowmem.runtime.serving``), or None.

    With ``$FLOWMEM_MODEL`` set, turns run the default agent; sessions a crashed
    server left ``running`` are released at start.
    """
    runner: TurnRunner | None = _runtime_serving().runner_from_env(store, memory)
    return runner


def _runtime_serving() -> ModuleType:
    """``flowmem.runtime.serving``; a ConfigurationError naming the extra when its packages are missing.

    The ``server`` extra includes the ``runtime`` one (decision 0102), so this is an
    install that lost a package: one line, not a traceback from the app factory.
    """
    try:
        from flowmem.runtime import serving
    except ImportError as exc:
        if exc.name is None or exc.name.startswith("flowmem"):
            raise
        raise ConfigurationError(
            f"flowmem serve builds the agent runtime, which needs {exc.name} (not installed): "
            "pip install 'flowmem[runtime]' (the server extra includes it)"
        ) from exc
    return serving


def check_environment() -> None:
    """Raise the ConfigurationError ``app_from_env`` would raise for what is installed, before it runs.

    ``flowmem serve`` calls it before it creates a token or starts a worker, so a
    missing package (the runtime's, OpenTelemetry's with ``$FLOWMEM_OTEL=1``) is one
    line naming the extra instead of a traceback from each worker's app factory.
    """
    _runtime_serving()
    tracing_from_env()


def _env_seconds(name: str, default: float) -> float:
    """The finite number of seconds >= 0 in ``$name`` (``default`` when unset or empty)."""
    raw = os.environ.get(name) or str(default)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigurationError(f"${name} must be a number of seconds >= 0, got {raw!r}")
    return seconds


def app_from_env() -> FastAPI:
    """Uvicorn factory: the store URL comes from ``$FLOWMEM_DATABASE_URL``.

    ``$FLOWMEM_STORE_CONCURRENCY`` bounds the threads doing store work (default
    by the store: 8 on SQLite, 2 on PostgreSQL, docs/decisions/0037);
    ``$FLOWMEM_INLINE_STORE=0`` keeps every store call off the event loop. The
    limits come from ``Limits.from_env`` and ``RateLimits.from_env``,
    ``$FLOWMEM_BODY_TIMEOUT`` bounds a body's arrival in seconds (default 30, 0: none),
    ``$FLOWMEM_TOKEN_CACHE_TTL`` is ``token_cache_ttl`` (default 2, 0: off),
    ``$FLOWMEM_METRICS=1`` turns ``metrics`` on, ``$FLOWMEM_OTEL=1`` tracing
    (``flowmem.api.metrics.tracing_from_env``).
    """
    body_timeout = _env_seconds(BODY_TIMEOUT_ENV, BODY_TIMEOUT)
    token_cache_ttl = _env_seconds(TOKEN_CACHE_TTL_ENV, TOKEN_CACHE_TTL)
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    try:
        concurrency = int(raw) if raw else None
    except ValueError:
        raise ConfigurationError(f"${CONCURRENCY_ENV} must be an integer, got {raw!r}") from None
    inline = os.environ.get(INLINE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
    tracing_from_env()
    return create_app(
        runner_factory=runtime_runner,
        store_concurrency=concurrency,
        inline_store=inline,
        freeze_gc=True,
        limits=Limits.from_env(),
        rate_limits=RateLimits.from_env(),
        body_timeout=body_timeout or None,
        token_cache_ttl=token_cache_ttl,
        metrics=os.environ.get(METRICS_ENV, "0").strip() == "1",
    )
