"""``GET /metrics``: the Prometheus sink of ``flowmem.metrics``, and the route that serves it.

``PrometheusSink`` turns the seam's events into ``prometheus_client`` counters and
histograms named ``flowmem_*`` (the table ``METRICS``; docs/metrics.md). Under
``flowmem serve --workers N`` every worker writes its values to files in
``$PROMETHEUS_MULTIPROC_DIR`` (a private directory ``serve`` makes), and a scrape,
whichever worker answers it, adds up every worker's files: the counts are the
server's, not one worker's. A worker that stops is marked dead (its live gauge goes);
one that died without stopping is found by its pid at the next scrape. Requests are
timed and counted by ``flowmem.api.logs.RequestLogMiddleware``.

The route needs a token with ``metrics:read`` (or ``admin``): the request gate has
authenticated it before the route runs, and the route checks the permission
(``flowmem.access.decide``, action ``read_metrics``) before it collects anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response

from flowmem import metrics
from flowmem.access import Principal, decide
from flowmem.errors import AccessDeniedError, AuthenticationError, ConfigurationError

if TYPE_CHECKING:
    from flowmem.store import Store

METRICS_PATH = "/metrics"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
METRICS_ENV = "FLOWMEM_METRICS"  # "1": ``app_from_env`` serves metrics (``flowmem serve`` sets it)
OTEL_ENV = "FLOWMEM_OTEL"  # "1": appends and turns are traced (the otel extra)
PREFIX = "flowmem_"

_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LENGTHS = (1, 10, 100, 1000, 10_000, 100_000, 1_000_000)

# name -> (kind, help, label names, histogram buckets)
METRICS: dict[str, tuple[str, str, tuple[str, ...], tuple[float, ...]]] = {
    "requests": ("counter", "HTTP requests answered, by method, route template and status.", ("method", "route", "status"), ()),
    "request_seconds": ("histogram", "HTTP request latency in seconds, by method and route template.", ("method", "route"), _SECONDS),
    "appends": ("counter", "Buffer appends that wrote (MEM-14: an all-empty append is a read).", (), ()),
    "messages_appended": ("counter", "Messages that became new buffer rows.", (), ()),
    "heals": ("counter", "Healed placeholders inserted for unanswered calls (MEM-3).", (), ()),
    "placeholder_replacements": ("counter", "Healed placeholders a late real result replaced (MEM-10).", (), ()),
    "deduplicated_messages": ("counter", "Incoming messages dropped as duplicates (MEM-1, MEM-2).", (), ()),
    "buffer_messages": ("histogram", "A buffer's length in messages after an append.", (), _LENGTHS),
    "refusals": ("counter", "Scope refusals, by rule (MEM-6 user, MEM-13 session) and code.", ("rule", "code"), ()),
    "normalization_drops": ("counter", "Messages or calls normalization dropped (MEM-5).", (), ()),
    "store_errors": ("counter", "Requests failed on the store, by error code.", ("code",), ()),
    "lock_wait_seconds": ("histogram", "Seconds an append waited for its address's lock (MEM-12).", ("backend",), _SECONDS),
    "lock_timeouts": ("counter", "Appends whose wait passed the lock timeout and went on unserialized (MEM-12).", ("backend",), ()),
    "turns": ("counter", "Session turns ended, by status and reason.", ("status", "reason"), ()),
    "idempotent_replays": ("counter", "Writes answered again from their idempotency key.", (), ()),
    "rate_limited": ("counter", "Requests refused 429, by code.", ("limit",), ()),
}
MAX_SERIES = 1_000  # label sets one metric may have in a worker; beyond it, every value is "other"
_DEAD_PID = re.compile(r"^gauge_live\w*?_(\d+)\.db$")


class PrometheusSink:
    """The ``flowmem.metrics.Sink`` over prometheus_client; ``scrape`` renders the exposition."""

    def __init__(self, store: Store | None = None) -> None:
        try:
            import prometheus_client
            from prometheus_client import values
        except ImportError as exc:  # pragma: no cover - the server extra installs it
            raise ConfigurationError(
                "metrics need prometheus-client: pip install 'flowmem[server]'"
            ) from exc
        self.store = store
        self.directory = os.environ.get(MULTIPROC_ENV) or None
        # prometheus_client picks its value class (files or memory) when first imported,
        # from the environment: picked again here, an import before the directory was
        # set does not keep this worker's values private
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        self.registry = None if self.directory else prometheus_client.CollectorRegistry()
        kinds = {"counter": prometheus_client.Counter, "histogram": prometheus_client.Histogram}
        self._metrics: dict[str, Any] = {}
        self._children: dict[tuple[Any, ...], Any] = {}
        self._series: dict[str, int] = {}
        for name, (kind, text, labels, buckets) in METRICS.items():
            extra: dict[str, Any] = {"buckets": buckets} if buckets else {}
            self._metrics[name] = kinds[kind](
                PREFIX + name, text, labels, registry=self.registry, **extra
            )
        workers = prometheus_client.Gauge(
            PREFIX + "workers",
            "Worker processes serving (live ones).",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        workers.set(1)
        if self.registry is not None and store is not None:
            self.registry.register(_DatabaseSize(store))

    def _child(self, name: str, labels: dict[str, str]) -> Any:
        """The metric ``name`` with ``labels``, looked up once per label set (``labels()`` is slow).

        A backstop under the seam's bounded labels (``flowmem.metrics.method_label``…):
        past ``MAX_SERIES`` label sets of one metric, a new set is counted as every
        label ``other``, so no caller can grow a worker's files without end.
        """
        if not labels:
            return self._metrics[name]
        key = (name, *labels.items())
        child = self._children.get(key)
        if child is None:
            made = self._series.get(name, 0)
            if made >= MAX_SERIES:
                labels = dict.fromkeys(labels, metrics.OTHER)
                key = (name, *labels.items())
                child = self._children.get(key)
                if child is not None:
                    return child
            self._series[name] = made + 1
            child = self._children[key] = self._metrics[name].labels(**labels)
        return child

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` to the counter ``name``."""
        self._child(name, labels).inc(amount)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record ``value`` in the histogram ``name``."""
        self._child(name, labels).observe(value)

    def scrape(self) -> bytes:
        """The text exposition of every worker's metrics (and the database size), now."""
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess

        if self.registry is not None:
            return bytes(generate_latest(self.registry))
        assert self.directory is not None
        mark_dead_workers(self.directory)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        if self.store is not None:
            registry.register(_DatabaseSize(self.store))
        return bytes(generate_latest(registry))

    def close(self) -> None:
        """This worker stops: its live gauges go, and the seam forgets the sink."""
        if self.directory:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), self.directory)  # type: ignore[no-untyped-call]
        if metrics.installed() is self:
            metrics.install(None)


def tracing_from_env() -> bool:
    """With ``$FLOWMEM_OTEL=1``, trace appends and turns to OpenTelemetry's global tracer provider.

    The provider and its exporter are the operator's (``opentelemetry-instrument``,
    the ``OTEL_*`` variables, or the SDK configured in code); ConfigurationError when
    the ``otel`` extra is not installed. Return whether tracing is on.
    """
    if os.environ.get(OTEL_ENV, "0").strip() != "1":
        return False
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigurationError(
            f"${OTEL_ENV}=1 needs OpenTelemetry: pip install 'flowmem[otel]'"
        ) from exc
    metrics.enable_tracing(trace.get_tracer("flowmem"))
    return True


def mark_dead_workers(directory: str) -> list[int]:
    """Mark dead every worker whose live-gauge file names a process that is gone; return them."""
    from prometheus_client import multiprocess

    dead: list[int] = []
    for path in Path(directory).iterdir():
        found = _DEAD_PID.match(path.name)
        if found is None:
            continue
        pid = int(found.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
            dead.append(pid)
        except PermissionError:  # alive, another user's
            continue
    return dead


class _DatabaseSize:
    """A collector: the database's size in bytes, asked of the store at each scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Any:
        """Yield the ``flowmem_database_bytes`` gauge when the store can tell its size."""
        from prometheus_client.core import GaugeMetricFamily

        size = getattr(self.store, "database_bytes", None)
        if size is None:
            return
        yield GaugeMetricFamily(
            PREFIX + "database_bytes", "Bytes the database takes (on disk or on its server).", size()
        )


def metrics_router(sink: PrometheusSink) -> APIRouter:
    """The ``GET /metrics`` route over ``sink`` (not in the OpenAPI document: it is not JSON)."""
    router = APIRouter()

    @router.get(METRICS_PATH, include_in_schema=False)
    async def read_metrics(request: Request) -> Response:
        """The Prometheus exposition; 403 without ``metrics:read`` (or ``admin``)."""
        principal = request.scope.get("state", {}).get("principal")
        if not isinstance(principal, Principal):  # the gate lets no such request through
            raise AuthenticationError("missing Authorization: Bearer token")
        decision = decide(principal, "read_metrics", None)
        if not decision.allowed:
            raise AccessDeniedError(decision.reason, rule=decision.rule)
        from prometheus_client import CONTENT_TYPE_LATEST

        body = await request.app.state.services.pool.in_thread(sink.scrape)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return router


__all__ = [
    "MAX_SERIES",
    "METRICS",
    "METRICS_ENV",
    "METRICS_PATH",
    "MULTIPROC_ENV",
    "OTEL_ENV",
    "PrometheusSink",
    "mark_dead_workers",
    "metrics_router",
    "tracing_from_env",
]
