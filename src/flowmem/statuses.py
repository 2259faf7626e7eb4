"""The one table from flowmem error codes to HTTP statuses (server and client share it).

``flowmem.api.errors`` answers with it; ``flowmem.client`` reads it backwards to
raise, for an API error, the class the in-process service raises. No HTTP
framework is imported here, so the client can use it without the server's
dependencies.
"""

from __future__ import annotations

from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    FlowmemError,
    InvalidInputError,
    InvalidTextError,
    LimitExceededError,
    ModelError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    ToolError,
)

# flowmem error class -> HTTP status, looked up along the error's MRO (its own class
# first, then its bases), so a subclass never depends on its place in the table.
STATUS_TABLE: dict[type[FlowmemError], int] = dict([
    (PayloadTooLargeError, 413),  # message_too_large, record_too_large, metadata_too_large too
    (InvalidTextError, 422),
    (InvalidInputError, 422),
    (LimitExceededError, 409),  # buffer_full, too_many_sessions
    (RateLimitedError, 429),  # rate_limited, too_many_auth_failures (with Retry-After)
    (AuthenticationError, 401),
    (AccessDeniedError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (ConfigurationError, 500),
    (StoreFullError, 507),
    (StoreLockedError, 503),  # another process holds the database's write lock
    (StoreError, 503),
    (ModelError, 502),
    (ToolError, 502),
])

# Codes produced by the HTTP layer (not by a flowmem error class), with their status.
HTTP_CODES: dict[str, int] = {
    "invalid_json": 400,
    "invalid_body": 400,
    "body_too_deep": 400,
    "duplicate_header": 400,
    "ambiguous_length": 400,
    "header_too_large": 431,
    "too_many_values": 413,
    "unsupported_media_type": 415,
    "payload_too_large": 413,
    "request_timeout": 408,
    "rate_limited": 429,
    "too_many_auth_failures": 429,
    "not_found": 404,
    "method_not_allowed": 405,
    "invalid_input": 422,
    "invalid_text": 422,
    "internal_error": 500,
}


def status_for(error: FlowmemError) -> int:
    """Return the HTTP status of a flowmem error: its nearest class in the table (500 if none)."""
    for kind in type(error).__mro__:
        status = STATUS_TABLE.get(kind)
        if status is not None:
            return status
    return 500
