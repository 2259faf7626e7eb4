"""The metrics seam: what the service, the stores, the runtime and the API count.

Each function below names one event (an append and what its rules did, a refusal by
rule, a lock wait…) and hands it to the installed ``Sink``; with none installed (the
default: a library, a test, the CLI) each is one ``None`` check and nothing else.
``flowmem serve`` installs the Prometheus sink of ``flowmem.api.metrics``
(docs/metrics.md). The rules stay pure: the core returns its counts in the append's
outcome (``AppendOutcome``), and the service counts them here.

Traces (OpenTelemetry, the ``otel`` extra) are off by default as well: ``span`` is a
no-op until ``enable_tracing`` is given a tracer.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

# What each refusing scope's refusal is under GR-MEM.
REFUSAL_RULES = {"user": "MEM-6", "session": "MEM-13"}

# Every label value a client can choose is one of a known set, ``OTHER`` for the rest
# (issue 38 §1: a new method per request was a new series, in every worker's files).
OTHER = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: object) -> str:
    """The request method as a label: one of ``METHODS``, else ``other`` (never the client's text)."""
    return method if isinstance(method, str) and method in METHODS else OTHER


def status_label(status: object) -> str:
    """An HTTP status as a label: its three digits (100–599), else ``other``."""
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return str(status)
    return OTHER


class Sink(Protocol):
    """Where the events go: counters and observations, by metric name and labels."""

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` to the counter ``name`` with ``labels``."""
        ...

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record ``value`` in the histogram ``name`` with ``labels``."""
        ...


_sink: Sink | None = None
_tracer: Any = None


def install(sink: Sink | None) -> None:
    """Send the events to ``sink`` from now on (None: nowhere, the default)."""
    global _sink
    _sink = sink


def installed() -> Sink | None:
    """The sink the events go to, or None when metrics are off."""
    return _sink


def appended(appended: int, healed: int, replaced: int, deduplicated: int, count: int) -> None:
    """One append: rows added, placeholders healed (MEM-3) and replaced (MEM-10), duplicates (MEM-1/2).

    ``count`` is the buffer's length after it (the buffer-size histogram).
    """
    sink = _sink
    if sink is None:
        return
    sink.inc("appends")
    if appended:
        sink.inc("messages_appended", appended)
    if healed:
        sink.inc("heals", healed)
    if replaced:
        sink.inc("placeholder_replacements", replaced)
    if deduplicated:
        sink.inc("deduplicated_messages", deduplicated)
    sink.observe("buffer_messages", count)


def refused(scope: str, code: str) -> None:
    """A scope refused to resolve: counted by rule (MEM-6 user, MEM-13 session) and code."""
    if _sink is not None:
        _sink.inc("refusals", rule=REFUSAL_RULES.get(scope, "none"), code=code)


def normalized(dropped: int) -> None:
    """A normalization (MEM-5) dropped ``dropped`` messages or calls."""
    if _sink is not None and dropped:
        _sink.inc("normalization_drops", dropped)


def lock_waited(seconds: float, backend: str) -> None:
    """An append waited ``seconds`` for its address's lock (MEM-12)."""
    if _sink is not None:
        _sink.observe("lock_wait_seconds", seconds, backend=backend)


def lock_timed_out(backend: str) -> None:
    """An append's wait for its turn passed the bound and it went on unserialized (MEM-12)."""
    if _sink is not None:
        _sink.inc("lock_timeouts", backend=backend)


def store_error(code: str) -> None:
    """A request failed on the store with the stable error ``code``."""
    if _sink is not None:
        _sink.inc("store_errors", code=code)


def turn_ended(status: str, reason: str) -> None:
    """A session turn ended: ``status`` completed or failed, ``reason`` why."""
    if _sink is not None:
        _sink.inc("turns", status=status, reason=reason)


def idempotent_replay() -> None:
    """A write with an idempotency key already answered was answered again, not redone."""
    if _sink is not None:
        _sink.inc("idempotent_replays")


def rate_limited(limit: str) -> None:
    """A request was refused 429 by the rate limit ``limit``."""
    if _sink is not None:
        _sink.inc("rate_limited", limit=limit)


def request(method: str, route: str, status: int, seconds: float) -> None:
    """An HTTP request answered: by method, route template and status, with its latency.

    The method and status are bounded here (``method_label``, ``status_label``);
    ``route`` must be a route template of the app or a fixed word, never a path.
    """
    sink = _sink
    if sink is not None:
        method = method_label(method)
        sink.inc("requests", method=method, route=route, status=status_label(status))
        sink.observe("request_seconds", seconds, method=method, route=route)


def enable_tracing(tracer: Any) -> None:
    """Trace appends and turns with an OpenTelemetry ``tracer`` (None: off, the default)."""
    global _tracer
    _tracer = tracer


_NO_SPAN = nullcontext()  # reusable: its ``__enter__`` returns None


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """An OpenTelemetry span named ``name`` around the block, or nothing when tracing is off.

    Off, one shared ``nullcontext`` (no generator made per append, decision 0161).
    """
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    found: AbstractContextManager[Any] = tracer.start_as_current_span(name, attributes=attributes)
    return found
