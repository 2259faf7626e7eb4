"""The one error hierarchy of flowmem.

Every error carries a stable ``code`` (a short snake_case string). The HTTP API maps
codes to statuses in one table (``flowmem.api.errors``); the CLI maps them to exit
codes. Nothing here knows about HTTP.
"""

from __future__ import annotations

from typing import Any


class FlowmemError(Exception):
    """Base of every error flowmem raises on purpose."""

    code = "flowmem_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInputError(FlowmemError, ValueError):
    """Input that no rule can coerce: wrong type, missing field, bad value."""

    code = "invalid_input"


class InvalidTextError(InvalidInputError):
    """Text flowmem cannot store or serve: not encodable as UTF-8 (a lone surrogate)."""

    code = "invalid_text"


class InvalidMessageError(InvalidInputError):
    """A message that cannot be appended or read as a message."""

    code = "invalid_message"


class UnknownRoleError(InvalidMessageError):
    """A message whose role is not one of system, user, assistant, tool."""

    code = "unknown_role"


class UnsupportedContentError(InvalidMessageError):
    """Provider content flowmem cannot carry as text (an image, a file, a reasoning item...)."""

    code = "unsupported_content"


class FormatMismatchError(InvalidInputError):
    """A payload read as a format it plainly is not (an Anthropic body read as OpenAI …)."""

    code = "format_mismatch"


class UnknownFormatError(InvalidInputError):
    """A payload in no format flowmem reads (a pydantic-ai or LangChain dump, anything else)."""

    code = "unknown_format"


class TranscriptError(InvalidInputError):
    """An agent transcript ``flowmem import`` refuses: ``details['line']`` names its bad line (nothing stored)."""

    code = "invalid_transcript"


class UnknownScopeError(InvalidInputError):
    """A memory scope name that is not one of the six scopes."""

    code = "unknown_scope"


class UnknownQueryParameterError(InvalidInputError):
    """A query parameter the route does not take (a typo such as ``sessionid``); names the ones it takes."""

    code = "unknown_query_parameter"


class NotSerializableError(InvalidInputError):
    """A memory value that cannot be stored as JSON."""

    code = "not_serializable"


class WindowTooSmallError(InvalidInputError):
    """A token budget in which no sendable window of the buffer fits (its newest turn is larger).

    Nothing is cut silently: raise the budget to at least ``needed`` tokens, or read
    the buffer without one.
    """

    code = "window_too_small"


class ConfigurationError(FlowmemError, ValueError):
    """A node, agent, store URL or setting that is configured wrongly."""

    code = "configuration_error"


class NodeError(InvalidInputError):
    """A workflow node received an input it cannot process; names the node and the port."""

    code = "node_error"

    def __init__(self, node: str, port: str | None, message: str) -> None:
        where = f"{node}.{port}" if port else node
        super().__init__(f"{where}: {message}", node=node, port=port)
        self.node = node
        self.port = port


class StoreError(FlowmemError):
    """A storage backend failed; the driver's own error never leaks past ``flowmem.store``."""

    code = "store_error"


class StoreBusyError(StoreError):
    """The backend stayed locked by another writer past every retry."""

    code = "store_busy"


class StoreLockedError(StoreBusyError):
    """Another process held the database's write lock past the bound: nothing was written.

    SQLite: a connection outside flowmem's writer queue (another program, the
    ``sqlite3`` shell, an older flowmem) kept the file locked longer than the
    ``lock_timeout`` (5 s by default); a retry once it lets go succeeds.
    """

    code = "store_locked"


class StoreUnavailableError(StoreError):
    """The backend cannot be reached or opened (server down, bad credentials, no file)."""

    code = "store_unavailable"


class StoreFullError(StoreError):
    """The disk (or the database's size limit) is full: the write was refused, nothing changed.

    SQLite's SQLITE_FULL, PostgreSQL's ``disk_full`` (53100), ENOSPC from an fsync.
    """

    code = "store_full"


class StoreReadOnlyError(StoreError):
    """The database only takes reads (a read-only file or mount, a read-only server).

    SQLite's SQLITE_READONLY, PostgreSQL's ``read_only_sql_transaction`` (25006), EROFS.
    """

    code = "store_read_only"


class StoreCorruptError(StoreError):
    """The database file is damaged (SQLite's SQLITE_CORRUPT/NOTADB, PostgreSQL's XX001/XX002)."""

    code = "store_corrupt"


class SchemaTooNewError(StoreError):
    """The database was written by a newer flowmem than this one."""

    code = "schema_too_new"


class NotFoundError(FlowmemError):
    """The thing asked for does not exist (or the caller may not know it exists)."""

    code = "not_found"


class DatabaseNotFoundError(NotFoundError):
    """A command that only reads or changes existing data named a database that does not exist.

    Nothing was created (no file, no directory, no schema): only ``flowmem serve``
    (and ``flowmem token create``) create a database. Check ``--database`` or
    ``$FLOWMEM_DATABASE_URL``.
    """

    code = "database_not_found"


class SessionDeletedError(NotFoundError):
    """A write to a session that was deleted (or whose owner was erased): refused, not a first write.

    A deleted session's id is remembered so that a write in flight during the delete,
    or a later one, never brings it back (DESIGN.md §5, issue 24 §2). Use a new id.
    """

    code = "session_deleted"


class AuthenticationError(FlowmemError):
    """No credentials, or credentials that do not name a valid principal."""

    code = "unauthenticated"


class AccessDeniedError(FlowmemError):
    """The access rules (MEM-9, MEM-15) deny this action; the denial is final."""

    code = "forbidden"

    def __init__(self, message: str, rule: str | None = None, **details: Any) -> None:
        super().__init__(message, rule=rule, **details)
        self.rule = rule


class ConflictError(FlowmemError):
    """The request conflicts with the current state (e.g. a session already running)."""

    code = "conflict"


class BufferChangedError(ConflictError):
    """A paged buffer read found the buffer written since its first page (``Store.page_bodies``).

    The pages read so far and the next ones would not be one snapshot: read again.
    """

    code = "buffer_changed"


class CompactionStaleError(ConflictError):
    """A compaction plan whose rows changed since it was made (another compaction, a clear).

    Nothing was archived or summarized: make a new plan and summarize its rows.
    """

    code = "compaction_stale"


class IdempotencyKeyInvalidError(InvalidInputError):
    """An ``Idempotency-Key`` that is not 1 to 255 printable ASCII characters."""

    code = "invalid_idempotency_key"


class IdempotencyKeyReusedError(InvalidInputError):
    """An idempotency key already used by this principal for a different request."""

    code = "idempotency_key_reused"


class IdempotencyKeyInFlightError(ConflictError):
    """An idempotency key whose first request has not been answered yet.

    Stores raise it too when a write finds its key recorded already (its
    transaction then wrote nothing); the HTTP API answers that with the first answer.
    """

    code = "idempotency_key_in_flight"


class ScopeRefusedError(InvalidInputError):
    """A write through an identity scope that refuses (MEM-6, MEM-13): nothing was stored.

    Raised where the caller has no neutral result to return (a LangGraph checkpoint
    write); give the context a usable user or session id.
    """

    code = "scope_refused"


class EmbeddingSpaceError(ConflictError):
    """Vectors of another embedding space than the stored ones: a put or search refused, nothing changed.

    ``details`` name both spaces (``stored``, ``asked``). Configure the index with the
    stored space, or move the store to the new one with ``flowmem reembed``.
    """

    code = "embedding_space_mismatch"


class ThreadForkedError(ConflictError):
    """A checkpoint whose parent is no longer its thread's latest: another writer moved the thread.

    Nothing was stored; run the turn again from the thread's latest checkpoint
    (docs/decisions/0040).
    """

    code = "thread_forked"


class SessionStaleError(ConflictError):
    """A write to an ADK session whose writer had not seen the session's latest event.

    Another runner stored an event since this one read the session; nothing was
    stored. Read the session again and append to it (docs/decisions/0053).
    """

    code = "session_stale"


class LineMovedError(ConflictError):
    """A line (a session buffer of checkpointed messages) no longer has the rows a write expected."""

    code = "line_moved"


class PayloadTooLargeError(InvalidInputError):
    """A request body or batch over the configured limit."""

    code = "payload_too_large"


class MessageTooLargeError(PayloadTooLargeError):
    """A message whose stored JSON form is larger than the configured ``message_bytes``."""

    code = "message_too_large"


class RecordTooLargeError(PayloadTooLargeError):
    """A memory record value whose JSON form is larger than the configured ``record_bytes``."""

    code = "record_too_large"


class MetadataTooLargeError(PayloadTooLargeError):
    """Session metadata whose JSON form is larger than the configured ``session_metadata_bytes``."""

    code = "metadata_too_large"


class LimitExceededError(FlowmemError):
    """A write refused because a stored quantity would pass its configured limit."""

    code = "limit_exceeded"


class BufferFullError(LimitExceededError):
    """An append that would take a buffer past the configured ``buffer_bytes``; nothing written."""

    code = "buffer_full"


class TooManySessionsError(LimitExceededError):
    """A new session for an owner who already has ``sessions_per_user`` sessions."""

    code = "too_many_sessions"


class QuotaExceededError(LimitExceededError):
    """A write that would take its owner past a per-user quota; nothing written.

    ``quota`` names it: ``bytes`` (stored buffer and record JSON), ``buffers`` or
    ``records``; ``user`` is the owner whose data it counts, ``limit`` the quota. The
    stores raise it with ``flowmem.limits.quota_exceeded``, whose message names the
    setting that raises the quota.
    """

    code = "quota_exceeded"
    quota = ""
    user = ""
    limit = 0

    def __init__(self, message: str, quota: str = "", user: str = "", limit: int = 0) -> None:
        super().__init__(message, quota=quota, user=user, limit=limit)
        self.quota, self.user, self.limit = quota, user, limit


class RateLimitedError(FlowmemError):
    """Too many requests from one token, or too many bad tokens from one peer.

    ``retry_after`` is the number of whole seconds after which a retry may succeed.
    """

    code = "rate_limited"

    def __init__(self, message: str, retry_after: int = 1, **details: Any) -> None:
        super().__init__(message, retry_after=retry_after, **details)
        self.retry_after = retry_after


class AuthRateLimitedError(RateLimitedError):
    """Too many requests with a bad token from one peer address."""

    code = "too_many_auth_failures"


class ModelError(FlowmemError):
    """A model provider refused or failed a request; carries the provider's message."""

    code = "model_error"

    def __init__(self, message: str, status: int | None = None, **details: Any) -> None:
        super().__init__(message, status=status, **details)
        self.status = status


class ToolError(FlowmemError):
    """A tool is unknown or was called with arguments it cannot take."""

    code = "tool_error"
