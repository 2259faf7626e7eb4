"""The parts of ``SqlStore`` that keep a table of their own: idempotency keys and tokens.

Bases of ``flowmem.store.sqlbase.SqlStore`` over ``SqlEngineBase``'s hooks: its
idempotency keys (``SqlIdempotencyKeys``) and its API tokens (``SqlTokens``). This module holds no SQL text: every statement is
named and looked up in the backend's ``SQL`` dict.
"""

from __future__ import annotations

import json

from flowmem.errors import IdempotencyKeyInFlightError
from flowmem.store.base import Idempotency, StoredAnswer, TokenRecord
from flowmem.store.engine import C
from flowmem.store.rows import check_texts, token_from_row
from flowmem.store.sqlengine import SqlEngineBase


class SqlIdempotencyKeys(SqlEngineBase[C]):
    """Idempotency keys and the answers they repeat, in the backend's ``idempotency_keys`` table."""

    def get_idempotency(self, owner: str, key: str, now: float) -> StoredAnswer | None:
        """Return the owner's live key; None when absent or expired (an expired one is deleted)."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["idem_get"], (owner, key)).fetchone()
            if row is None:
                return None
            if row[3] is not None and row[3] <= now:
                conn.execute(self.SQL["idem_drop_expired"], (owner, key, now))
                return None
        return StoredAnswer(str(row[0]), int(row[1]), str(row[2]), row[3])

    def claim_idempotency(self, idempotency: Idempotency, now: float) -> StoredAnswer | None:
        """Record the key as claimed (status 0, one transaction); None when free, else the live key."""
        params = (idempotency.owner, idempotency.key, idempotency.fingerprint)

        def work(conn: C) -> StoredAnswer | None:
            claimed = conn.execute(
                self.SQL["idem_claim"], (*params, idempotency.expires_at, now)
            ).rowcount
            if claimed:
                return None
            row = conn.execute(self.SQL["idem_get"], params[:2]).fetchone()
            if row is None:  # pragma: no cover - the conflicting key is locked until commit
                raise IdempotencyKeyInFlightError("this idempotency key is being recorded")
            return StoredAnswer(str(row[0]), int(row[1]), str(row[2]), row[3])

        return self._write(work)

    def answer_idempotency(self, owner: str, key: str, status: int, body: str) -> None:
        """Record the answer of a claimed key (no change when it is no longer claimed)."""
        self._changed("idem_answer", (status, body, owner, key))

    def release_idempotency(self, owner: str, key: str) -> None:
        """Delete a claimed key whose request failed (an answered key is kept)."""
        self._changed("idem_release", (owner, key))


class SqlTokens(SqlEngineBase[C]):
    """API token records (their hashes only), in the backend's ``tokens`` table."""

    def create_token(self, token: TokenRecord) -> None:
        """Store a token record (its hash only); ConflictError on a duplicate id or hash."""
        check_texts(id=token.id, user_id=token.user_id, label=token.label)
        params = (
            token.id,
            token.token_hash,
            token.user_id,
            json.dumps(sorted(token.permissions)),
            token.created_at,
            token.revoked,  # a bool binds as BOOLEAN (PostgreSQL) and as 0/1 (SQLite)
            token.label,
        )
        self._insert_new("token_insert", params, f"token {token.id}")

    def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        """Return the token with this hash, revoked or not."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["token_by_hash"], (token_hash,)).fetchone()
        return None if row is None else token_from_row(row)

    def list_tokens(self) -> list[TokenRecord]:
        """Return every token record, oldest first."""
        with self._connection() as conn:
            rows = conn.execute(self.SQL["tokens_all"]).fetchall()
        return [token_from_row(r) for r in rows]

    def revoke_token(self, token_id: str) -> bool:
        """Mark a token revoked; True when it existed."""
        return self._changed("token_revoke", (token_id,))


__all__ = ["SqlIdempotencyKeys", "SqlTokens"]
