"""``flowmem.client``: a flowmem server from any Python program, over HTTP.

``Client`` (sync) and ``AsyncClient`` (asyncio) cover every route of the API
(docs/client.md). They need only ``httpx`` (the ``client`` extra):
nothing of the server (FastAPI, uvicorn, a database driver) is imported. Results
are dataclasses — the memory results are the very types ``MemoryService`` returns
— and a refusal is raised as the ``flowmem.errors`` class, with the stable code,
that the service raises in process. ``Client`` implements ``flowmem.memory.Memory``,
``AsyncClient`` its awaited twin ``flowmem.memory.AsyncMemory``.
"""

from __future__ import annotations

from flowmem.client.aio import AsyncClient
from flowmem.client.calls import IDEMPOTENCY_HEADER, Call
from flowmem.client.errors import ApiError, ServerUnreachableError
from flowmem.client.retry import RetryPolicy
from flowmem.client.sync import Client
from flowmem.client.types import (
    BufferRead,
    CheckResult,
    Health,
    NormalizeResult,
    RepairEntry,
    RepairLog,
    ResetResult,
    SearchHit,
    SearchResult,
    Session,
    SessionBuffer,
    SessionConversation,
    SessionPage,
    StopResult,
    TranscriptPage,
    TranscriptRow,
    TurnResult,
    UserErasure,
    Violation,
)
from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult

__all__ = [
    "IDEMPOTENCY_HEADER",
    "ApiError",
    "AsyncClient",
    "BufferRead",
    "BufferResult",
    "Call",
    "CheckResult",
    "Client",
    "Health",
    "NormalizeResult",
    "PopResult",
    "ReadResult",
    "RepairEntry",
    "RepairLog",
    "ResetResult",
    "RetryPolicy",
    "SearchHit",
    "SearchResult",
    "ServerUnreachableError",
    "Session",
    "SessionBuffer",
    "SessionConversation",
    "SessionPage",
    "StopResult",
    "TranscriptPage",
    "TranscriptRow",
    "TurnResult",
    "UserErasure",
    "Violation",
    "WriteResult",
]
