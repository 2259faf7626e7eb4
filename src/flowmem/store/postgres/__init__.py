"""``PostgresStore``: PostgreSQL through psycopg 3 and a ``psycopg_pool`` pool.

For deployments with many processes or machines (``postgresql://user@host/db``).
Appends run ``flowmem.core.apply_append`` through ``SqlBufferEditor`` inside one
transaction that first takes a transaction-scoped advisory lock on the buffer's
address under ``lock_timeout`` (MEM-12).

The package's modules, each importing only those listed after it (an
import-linter contract in pyproject.toml): ``store`` (``PostgresStore``, its
connections and appends), ``pipeline`` (the append's libpq pipeline, the one
module using psycopg's internals), ``queries`` (the SQL text) and ``schema``
(the migrations).
"""

from flowmem.store.postgres.queries import SQL
from flowmem.store.postgres.schema import MIGRATIONS
from flowmem.store.postgres.store import PostgresStore, advisory_key, parse_url

__all__ = ["MIGRATIONS", "SQL", "PostgresStore", "advisory_key", "parse_url"]
