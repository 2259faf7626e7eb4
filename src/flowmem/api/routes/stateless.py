"""Stateless endpoints over the core rules and the formats: ``/v1/normalize`` and ``/v1/check``.

The body is the payload as a client has it: a message list, or a request body of
flowmem rows or of a provider (docs/formats.md). ``format`` names its format and
is detected when absent; a payload that plainly is not the named format is
refused (``format_mismatch``), so it is never read, or written back, as corrupt rows,
and a payload in no format flowmem reads is refused (``unknown_format``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from flowmem import metrics
from flowmem.api.deps import CALLER, Caller
from flowmem.api.models import CheckOut, Format, NormalizeOut, Payload
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, errors
from flowmem.core import check_storable, normalize
from flowmem.formats import check_payload, read_payload, write_answer

router = APIRouter(prefix="/v1", tags=["stateless"], route_class=KnownQueryRoute)

FORMAT_QUERY = Query(
    None,
    description="The payload's format: `rows` (flowmem messages), `openai` (Chat "
    "Completions), `responses` (Responses API / Agents SDK items), `anthropic` (Messages "
    "API) or `gemini` (google-genai contents). Detected from the payload when absent; a "
    "payload that plainly is not this format is refused with 422 `format_mismatch`, one in "
    "no format flowmem reads with 422 `unknown_format`.",
)

TO_QUERY = Query(None, description="The output format (default: the payload's format).")


def _read(body: list[Any] | dict[str, Any], fmt: str | None) -> tuple[str, list[Any]]:
    """Return ``(format, rows)`` of a payload; text that cannot be served is ``invalid_text`` (422)."""
    check_storable(body, "body")
    return read_payload(body, fmt, "body")


@router.post(
    "/normalize", response_model=NormalizeOut, responses=errors(*AUTH_ERRORS, *BODY_ERRORS)
)
async def normalize_messages(
    body: Payload,
    format: Format | None = FORMAT_QUERY,
    to: Format | None = TO_QUERY,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Normalize a history so a provider accepts it (MEM-5, content parts kept), in format `to`.

    `dropped` counts what normalization dropped; `not_carried` lists, per kind, what
    format `to` cannot carry from another provider and left out. A payload in no
    format flowmem reads (a pydantic-ai or LangChain dump) is 422 `unknown_format`.
    """

    def job(_: Any) -> dict[str, Any]:
        found, rows = _read(body, format)
        result = normalize(rows, keep_content=True)
        metrics.normalized(result.dropped)
        target = to or found
        not_carried: dict[str, int] = {}
        answer: dict[str, Any] = {"format": found, "to": target, "dropped": result.dropped}
        if target == "rows":
            answer["messages"] = result.messages
        else:
            answer.update(write_answer(target, result.messages, not_carried))
        answer["not_carried"] = not_carried
        return answer

    return await caller.in_long_thread(job)


@router.post("/check", response_model=CheckOut, responses=errors(*AUTH_ERRORS, *BODY_ERRORS))
async def check_messages(
    body: Payload,
    format: Format | None = FORMAT_QUERY,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """List what a provider would reject in a history; `format` is the one it was read in.

    Each violation's `index` is the position of its entry in the list sent (a
    message, or a Responses item). A provider's payload is judged as that provider
    judges it (OpenAI's APIs take system messages anywhere); flowmem rows against
    MEM-5 (system messages first).
    """

    def job(_: Any) -> dict[str, Any]:
        check_storable(body, "body")
        found, violations = check_payload(body, format, "body")
        return {
            "format": found,
            "sendable": not violations,
            "violations": [v.to_dict() for v in violations],
        }

    return await caller.in_long_thread(job)
