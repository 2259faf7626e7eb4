"""When and how long ``flowmem.client`` waits before sending a request again.

Retried: a connection that failed or broke (no answer), 429 (the server's
``Retry-After`` is honoured: the client waits exactly that long, unless it is
longer than ``max_retry_after``, then the ``RateLimitedError`` is raised at once),
and 503 (except ``store_corrupt`` and ``schema_too_new``, which no wait mends).
Everything else is final. Waits grow exponentially from ``base_delay`` up to
``max_delay``, with jitter (a random half of each wait), so clients refused
together do not come back together. Writes are retried safely because each
carries one ``Idempotency-Key`` for all its attempts (docs/client.md).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from flowmem.errors import ConfigurationError

# 503 codes that waiting does not mend
FINAL_503 = frozenset({"store_corrupt", "schema_too_new"})


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a request gets and how long to wait between them.

    ``max_attempts`` counts the first one (1: never retry). Defaults: 4 attempts,
    waits of about 0.25, 0.5, 1 s (jittered), a 429's ``Retry-After`` up to 30 s.
    """

    max_attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigurationError(f"max_attempts must be an integer, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigurationError(f"{name} must be a number >= 0, got {value!r}")

    @classmethod
    def never(cls) -> RetryPolicy:
        """One attempt, no retry."""
        return cls(max_attempts=1)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), jittered."""
        ceiling = float(min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def wait_for(
        self, attempt: int, status: int | None, code: str | None, retry_after: int | None
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None when the outcome is final.

        ``status`` is None for a connection that failed without an answer.
        """
        if attempt >= self.max_attempts:
            return None
        if status is None:
            return self.backoff(attempt)
        if status == 429:
            if retry_after is None:
                return self.backoff(attempt)
            return float(retry_after) if retry_after <= self.max_retry_after else None
        if status == 503 and code not in FINAL_503:
            if retry_after is not None and retry_after <= self.max_retry_after:
                return max(float(retry_after), self.backoff(attempt))
            return self.backoff(attempt)
        return None


__all__ = ["FINAL_503", "RetryPolicy"]
