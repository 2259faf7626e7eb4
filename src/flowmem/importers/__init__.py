"""``flowmem import``: agents' own transcripts stored as flowmem sessions (issue 41 §4).

``claude_code`` reads Claude Code's JSONL transcripts (pure); ``session_import``
stores what a session's buffer lacks through the ``MemoryService``, idempotently.
``import_claude_code`` joins the two. docs/import.md has the format's mapping and
the hooks that keep a flowmem session in step with a Claude Code session.
"""

from __future__ import annotations

from flowmem.errors import InvalidInputError
from flowmem.importers.claude_code import SOURCE, Transcript, fresh_segments, parse_transcript
from flowmem.importers.session_import import ImportResult, ImportTarget, import_rows
from flowmem.scope import ExecutionContext
from flowmem.service import check_key

BUFFER_KEY = "claude_code"
"""The session buffer a Claude Code transcript is imported into (``--key`` names another)."""


def import_claude_code(
    service: ImportTarget,
    data: bytes,
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    key: str = BUFFER_KEY,
) -> ImportResult:
    """Import a Claude Code transcript (its bytes) into session ``session_id``'s buffer ``key``.

    The whole file is checked first (TranscriptError names its first bad line, and
    nothing is stored); then only what the buffer lacks is stored, under the append
    rules (MEM-1, MEM-2, MEM-3, MEM-10). ``session_id`` defaults to the transcript's
    own ``sessionId``; the session is created owned by ``user_id`` (nobody when None).
    ``service``: a ``MemoryService``, or a ``flowmem.client.Client`` to import into a
    server (the session is then the token's user's; leave ``user_id`` None).
    """
    check_key(key)
    transcript: Transcript = parse_transcript(data)
    session = session_id if session_id is not None else transcript.session_id
    if session is None:
        raise InvalidInputError(
            "the transcript names no sessionId: give the flowmem session with --session ID",
            argument="session",
        )
    context = ExecutionContext(session_id=session, user_id=user_id)
    return import_rows(
        service,
        context,
        key,
        SOURCE,
        lambda known: fresh_segments(transcript, known),
        transcript.skipped,
    )


__all__ = ["BUFFER_KEY", "ImportResult", "ImportTarget", "import_claude_code", "parse_transcript"]
