"""Memory records as tools: ``remember``, ``recall``, ``list_memories``, ``forget``.

A record is a JSON value under a key, in the caller's ``user`` scope (the default:
what the user's every session shares) or in one named session's scope. ``recall``
finds records by key, or by text: a case-insensitive substring of the key or the
value's JSON, over the scope's records in key order (at most ``SCAN_LIMIT`` read).
Matching by meaning plugs in at ``MATCHERS`` (a ``Matcher`` scores a record for a
query) once the store has semantic search; ``mode="text"`` is the one there is.

The knowledge graph's records (``graph.PREFIX``) are the graph tools': these tools
neither list nor find them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from flowmem.errors import InvalidInputError, ScopeRefusedError
from flowmem.mcp.answers import answered, tool_errors
from flowmem.mcp.caller import Caller
from flowmem.mcp.keyed import check_request_id, fingerprint, once
from flowmem.results import WriteResult
from flowmem.scope import Refusal
from flowmem.service import MemoryService
from flowmem.service.checks import check_key
from flowmem.store.base import Idempotency
from flowmem.store.listing import iter_records
from flowmem.store.listing.records import ListedRecord

GRAPH_PREFIX = "mcp.graph/"
"""The keys the knowledge-graph tools keep (``flowmem.mcp.graph``)."""
SCAN_LIMIT = 2000
"""The most records one text search reads."""
LIST_LIMIT = 100

Matcher = Callable[[str, ListedRecord], bool]
"""Whether a listed record (key and JSON text) matches a query."""


def text_match(query: str, record: ListedRecord) -> bool:
    """A case-insensitive substring of the key or of the value's JSON text."""
    needle = query.casefold()
    return needle in record.key.casefold() or needle in (record.text or "").casefold()


MATCHERS: dict[str, Matcher] = {"text": text_match}
"""``recall``'s modes: how a record is matched to a query (by meaning: a matcher over vectors)."""

Session = Annotated[
    str,
    Field(description="A session id: the record lives in that session's scope. Omit for your user scope."),
]
"""A plain ``str`` (``""``: the user scope): the SDK reads a ``str | None`` argument ``"null"`` as None."""
RequestId = Annotated[
    str | None,
    Field(description="Any unique id of this call (a UUID): a retry with the same id is answered once."),
]


def _scope(caller: Caller, session: str | None, *, write: bool) -> tuple[str, Any, Any]:
    """(scope, context, guard) of a call in the user scope or in ``session``'s."""
    if not session:
        return "user", caller.user_context(), None
    if write:
        context, guard = caller.session_write(session)
        return "session", context, guard
    return "session", caller.session_read(session), None


def _refused(refusal: Refusal) -> ScopeRefusedError:
    """The error of a refused scope (MEM-7's neutral result, as a tool error)."""
    return ScopeRefusedError(f"the scope was refused ({refusal.code})", reason=refusal.code)


def remember(
    caller: Caller, key: str, value: Any, session: str | None, ttl: float | None, request_id: str | None
) -> dict[str, Any]:
    """Store ``value`` under ``key`` (replacing what was there)."""
    name, rid = check_key(key), check_request_id(request_id)
    memory = caller.services.memory
    mark = fingerprint("remember", {"key": key, "value": value, "session": session, "ttl": ttl})

    def write(idem: Idempotency | None) -> dict[str, Any]:
        scope, context, guard = _scope(caller, session, write=True)
        answer = {"key": name, "scope": scope, "session": session or None, "stored": True}
        keyed = None if idem is None else idem.mapped(lambda _: answer)
        result = memory.write(scope, name, value, context, ttl, guard=guard, idempotency=keyed)
        if result.refusal is not None:
            raise _refused(result.refusal)
        return answer

    return once(memory, caller.user, rid, mark, write)


def listed(memory: MemoryService, scope: str, scope_id: str, prefix: str = "") -> Any:
    """The live records of a scope id under ``prefix``, in key order, read a page at a time."""
    return iter_records(memory.store, scope, scope_id, prefix, now=float(memory.clock()))


def recall(
    caller: Caller, key: str | None, query: str | None, session: str | None, mode: str, limit: int
) -> dict[str, Any]:
    """A record by key, or the records whose key or value matches ``query``."""
    memory = caller.services.memory
    if (key is None) == (query is None):
        raise InvalidInputError("give key (one record) or query (a search), not both nor neither")
    scope, context, _ = _scope(caller, session, write=False)
    if key is not None:
        result = memory.read(scope, check_key(key), context)
        if result.refusal is not None:
            raise _refused(result.refusal)
        found = [{"key": key, "value": result.value}] if result.found else []
        return {"found": result.found, "memories": found}
    matcher = MATCHERS.get(mode)
    if matcher is None:
        raise InvalidInputError(f"mode must be one of {sorted(MATCHERS)}, got {mode!r}")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be non-empty text")
    scope_id = memory.resolve("recall", scope, "recall", context)
    if isinstance(scope_id, Refusal):
        raise _refused(scope_id)
    hits: list[dict[str, Any]] = []
    for read, record in enumerate(listed(memory, scope, scope_id)):
        if read >= SCAN_LIMIT or len(hits) >= limit:
            break
        if not record.key.startswith(GRAPH_PREFIX) and matcher(query, record):
            hits.append({"key": record.key, "value": record.value})
    return {"found": bool(hits), "memories": hits}


def list_memories(
    caller: Caller, session: str | None, prefix: str, start: str | None, limit: int
) -> dict[str, Any]:
    """A page of the scope's record keys (and values), in key order."""
    memory = caller.services.memory
    scope, context, _ = _scope(caller, session, write=False)
    scope_id = memory.resolve("list", scope, prefix or "list", context)
    if isinstance(scope_id, Refusal):
        raise _refused(scope_id)
    page: list[dict[str, Any]] = []
    more = None
    records = iter_records(
        memory.store, scope, scope_id, prefix, now=float(memory.clock()), start=start or None
    )
    for record in records:
        if record.key.startswith(GRAPH_PREFIX):
            continue
        if len(page) == limit:
            more = record.key
            break
        page.append({"key": record.key, "value": record.value, "expires_at": record.expires_at})
    return {"memories": page, "next_start": more}


def forget(caller: Caller, key: str, session: str | None, request_id: str | None) -> dict[str, Any]:
    """Delete the record under ``key``; ``removed`` says whether there was one."""
    name, rid = check_key(key), check_request_id(request_id)
    memory = caller.services.memory
    mark = fingerprint("forget", {"key": key, "session": session})

    def delete(idem: Idempotency | None) -> dict[str, Any]:
        scope, context = ("session", caller.session_drive(session)) if session else ("user", caller.user_context())

        def answer(result: WriteResult) -> dict[str, Any]:
            return {"key": name, "removed": bool(result.removed)}

        keyed = None if idem is None else idem.mapped(answer)
        result = memory.delete(scope, name, context, idempotency=keyed)
        if result.refusal is not None:
            raise _refused(result.refusal)
        return answer(result)

    return once(memory, caller.user, rid, mark, delete)


def register(server: MCPServer, caller_of: Callable[[Any], Caller]) -> None:
    """Add the record tools to ``server``; ``caller_of(ctx)`` is a call's ``Caller``."""
    @server.tool(name="remember", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    @tool_errors
    async def remember_memory(
        key: Annotated[str, Field(description="A name for what to remember, e.g. 'preferred_language'.")],
        value: Annotated[Any, Field(description="Any JSON value: text, a number, an object.")],
        ctx: Context,
        session: Session = "",
        ttl_seconds: Annotated[float | None, Field(description="Forget it after this many seconds.")] = None,
        request_id: RequestId = None,
    ) -> CallToolResult:
        """Remember a fact under a key, in your user memory (every session sees it) or in one session's."""
        return await answered(caller_of(ctx), lambda caller: remember(caller, key, value, session, ttl_seconds, request_id))

    @server.tool(name="recall", annotations=ToolAnnotations(read_only_hint=True))
    @tool_errors
    async def recall_memory(
        ctx: Context,
        key: Annotated[str | None, Field(description="The exact key of one memory.")] = None,
        query: Annotated[str | None, Field(description="Text to find in memories' keys and values.")] = None,
        session: Session = "",
        mode: Annotated[str, Field(description="How query matches: 'text' (a substring, any case).")] = "text",
        limit: Annotated[int, Field(ge=1, le=LIST_LIMIT, description="The most memories returned.")] = 20,
    ) -> CallToolResult:
        """Recall memories: one by its key, or those whose key or value contains the query text."""
        return await answered(caller_of(ctx), lambda caller: recall(caller, key, query, session, mode, limit))

    @server.tool(name="list_memories", annotations=ToolAnnotations(read_only_hint=True))
    @tool_errors
    async def list_memories_tool(
        ctx: Context,
        session: Session = "",
        prefix: Annotated[str, Field(description="Only keys that start with this.")] = "",
        start: Annotated[str | None, Field(description="A next_start from the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=LIST_LIMIT)] = 50,
    ) -> CallToolResult:
        """List your memories (keys and values) in key order, a page at a time."""
        return await answered(caller_of(ctx), lambda caller: list_memories(caller, session, prefix, start, limit))

    @server.tool(name="forget", annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
    @tool_errors
    async def forget_memory(
        key: Annotated[str, Field(description="The key of the memory to delete.")],
        ctx: Context,
        session: Session = "",
        request_id: RequestId = None,
    ) -> CallToolResult:
        """Forget (delete) the memory under a key."""
        return await answered(caller_of(ctx), lambda caller: forget(caller, key, session, request_id))

    del remember_memory, recall_memory, list_memories_tool, forget_memory
