"""API tokens and the principals they name.

A token is ``fm_`` followed by 43 random URL-safe characters (``secrets``). It is
shown once, when created; the store keeps only its SHA-256 hash in a
``TokenRecord``. A token without a user id is a *service principal*: it carries
permissions but owns nothing (MEM-9). Permissions come from the closed list in
``flowmem.access.PERMISSIONS`` (docs/access.md).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterable

from flowmem.access import PERM_ADMIN, PERM_CREATE, PERMISSIONS, Principal, real_id
from flowmem.errors import AuthenticationError, InvalidInputError, NotFoundError
from flowmem.scope import usable_identity
from flowmem.store.base import TokenRecord, TokenStore

__all__ = [
    "DEFAULT_PERMISSIONS",
    "TOKEN_PREFIX",
    "Principal",
    "authenticate",
    "bearer_token",
    "bootstrap_admin_token",
    "create_token",
    "hash_token",
    "revoke_token",
    "well_formed",
]

TOKEN_PREFIX = "fm_"
# What a token carries when no permission is asked for explicitly.
DEFAULT_PERMISSIONS: frozenset[str] = frozenset({PERM_CREATE})
_MAX_TOKEN_LENGTH = 256


def hash_token(token: str) -> str:
    """Return the SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _check_permissions(permissions: Iterable[str]) -> frozenset[str]:
    chosen = frozenset(permissions)
    unknown = sorted(chosen - PERMISSIONS)
    if unknown:
        raise InvalidInputError(
            f"unknown permission(s) {', '.join(unknown)}: expected any of "
            f"{', '.join(sorted(PERMISSIONS))}",
            permissions=unknown,
        )
    return chosen


def create_token(
    store: TokenStore,
    user_id: str | None,
    permissions: Iterable[str] = DEFAULT_PERMISSIONS,
    *,
    label: str = "",
    clock: Callable[[], float] = time.time,
) -> tuple[str, TokenRecord]:
    """Create a token for ``user_id`` (None = a service principal); return (token, record).

    The user id must be a usable identity (``real_id``, DESIGN.md §3); the record keeps
    its identity text (NFC). Only the token's hash is stored.
    """
    identity = None if user_id is None else real_id(user_id)
    if user_id is not None and identity is None:
        raise InvalidInputError(
            f"user id {user_id!r} is not a usable identity (1-255 characters, no "
            "whitespace, not 0 or a non-positive integer, not a placeholder such as "
            "'None' or 'null')",
            field="user_id",
        )
    chosen = _check_permissions(permissions)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = TokenRecord(
        id="tok_" + secrets.token_hex(8),
        token_hash=hash_token(token),
        user_id=identity,
        permissions=chosen,
        created_at=clock(),
        label=label,
    )
    store.create_token(record)
    return token, record


def revoke_token(store: TokenStore, token_id: str) -> None:
    """Revoke a token by id; raise NotFoundError when there is none."""
    if not store.revoke_token(token_id):
        raise NotFoundError(f"no token with id {token_id!r}")


def bearer_token(header: str | None) -> str:
    """Return the token of an ``Authorization: Bearer …`` header; raise AuthenticationError."""
    if not header:
        raise AuthenticationError("missing Authorization: Bearer token")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationError("the Authorization header must be 'Bearer <token>'")
    return token


def well_formed(token: str) -> bool:
    """True when ``token`` has the shape of a token (prefix, length); it may still be unknown."""
    return token.startswith(TOKEN_PREFIX) and len(token) <= _MAX_TOKEN_LENGTH


def authenticate(store: TokenStore, token: str) -> Principal:
    """Return the principal a token names; raise AuthenticationError if unknown or revoked."""
    if not well_formed(token):
        raise AuthenticationError("invalid token")
    record = store.token_by_hash(hash_token(token))
    if record is None or record.revoked:
        # one answer for both: a caller must not learn that a token once existed
        raise AuthenticationError("invalid token")
    return principal_of(record)


def principal_of(record: TokenRecord) -> Principal:
    """Return the principal of a token record, with its identity computed once, here."""
    principal = Principal(
        user_id=record.user_id,
        permissions=frozenset(record.permissions),
        token_id=record.id,
        revoked=record.revoked,
    )
    # ``Principal.identity`` is a cached property: set, it is never computed again
    vars(principal)["identity"] = usable_identity(record.user_id)
    return principal


def bootstrap_admin_token(store: TokenStore, user_id: str = "admin") -> str | None:
    """On a database with no tokens at all, create an admin token and return it; else None."""
    if store.list_tokens():
        return None
    token, _ = create_token(
        store, user_id, {PERM_ADMIN, PERM_CREATE}, label="bootstrap admin (first start)"
    )
    return token
