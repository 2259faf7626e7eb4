"""Which scope id an HTTP caller gets: the execution context of a memory request.

- ``user``: the caller's own user id; a principal without one (a service token)
  gets a context with no user, so the scope refuses and the result is neutral
  (MEM-6, MEM-7).
- ``session``: the ``session_id`` query parameter names a session the caller may
  view (reads, loads) or drive (writes, appends, deletes, clears); the context's
  user is the session's owner, never the caller (MEM-8). Without ``session_id``
  the scope refuses (MEM-13) and the result is neutral. A session the caller may
  not view is 404; one it may view but not drive is 403 for a write.
- ``global``/``workflow``/``pipeline``/``execution`` (shared scopes): need the
  ``memory:shared`` permission, the ``shared_memory`` action of
  ``flowmem.access.decide`` (403 otherwise); the ids come from the
  ``workflow_id``/``pipeline_id``/``execution_id`` query parameters.
"""

from __future__ import annotations

from flowmem.access import Principal, decide
from flowmem.errors import AccessDeniedError
from flowmem.scope import ExecutionContext, check_scope
from flowmem.sessions import SessionService, memory_context

NODE_ID = "http"


def scope_context(
    sessions: SessionService,
    principal: Principal,
    scope: str,
    *,
    write: bool,
    session_id: str | None = None,
    workflow_id: str | None = None,
    pipeline_id: str | None = None,
    execution_id: str | None = None,
) -> ExecutionContext:
    """Return the execution context a memory request of ``principal`` runs under."""
    name = check_scope(scope)
    if name == "user":
        return ExecutionContext(user_id=principal.identity, node_id=NODE_ID)
    if name == "session":
        if session_id is None:
            return ExecutionContext(node_id=NODE_ID)  # refuses: no session (MEM-13)
        session = sessions.load(principal, session_id, "drive" if write else "view")
        return memory_context(session, NODE_ID)
    decision = decide(principal, "shared_memory", None)
    if not decision.allowed:
        raise AccessDeniedError(decision.reason, rule=decision.rule)
    return ExecutionContext(
        workflow_id=workflow_id,
        pipeline_id=pipeline_id,
        execution_id=execution_id,
        node_id=NODE_ID,
    )
