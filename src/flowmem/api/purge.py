"""The server's background purge of expired memory records (``Store.purge_expired``).

Reads already treat an expired record as absent; this task reclaims the space.
Every ``interval`` seconds it deletes expired records in batches of
``PURGE_BATCH`` (one short transaction each, in a store thread) until a batch
comes back short. A failure is logged and retried at the next tick; it never
stops the task or the server. Every worker of ``flowmem serve --workers N`` runs
one: the deletes are idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from flowmem.api.pool import StorePool
from flowmem.store.base import PURGE_BATCH, Store

log = logging.getLogger("flowmem")

PURGE_INTERVAL = 60.0  # seconds between two purges of expired records


async def purge_expired_forever(
    pool: StorePool, store: Store, clock: Callable[[], float], interval: float
) -> None:
    """Every ``interval`` seconds, delete every expired record in batches; log failures and go on."""
    while True:
        await asyncio.sleep(interval)
        try:
            while await pool.in_thread(store.purge_expired, clock(), PURGE_BATCH) >= PURGE_BATCH:
                pass
        except Exception:  # a busy or unreachable store: the next tick tries again
            log.warning("purging expired records failed; retrying in %gs", interval, exc_info=True)
