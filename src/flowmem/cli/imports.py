"""``flowmem import claude-code TRANSCRIPT``: an agent's own transcript stored as a flowmem session (issue 41 §4).

Idempotent: importing the same transcript again, or a longer version of it, stores
only what is new. ``--hook`` reads what a Claude Code hook (``PreCompact``, ``Stop``,
``SessionEnd``) gives on stdin (``session_id``, ``transcript_path``) and is silent
on success; a failure is one line on stderr and exit code 1, which Claude Code
shows to the user without blocking the session (its exit code 2 would block a
``Stop``). docs/import.md has the hooks' configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowmem.cli.database import DATABASE_ENV, database_option, default_database_url, open_database
from flowmem.errors import FlowmemError, InvalidInputError
from flowmem.importers import BUFFER_KEY, ImportResult, ImportTarget, import_claude_code
from flowmem.service import MemoryService

if TYPE_CHECKING:
    from flowmem.client import Client

URL_ENV = "FLOWMEM_URL"  # the server the Python client reaches (its token: $FLOWMEM_TOKEN)

HOOK_INPUT_BYTES = 1_000_000
"""The most a hook's JSON on stdin may hold (Claude Code sends a few hundred bytes)."""
EXIT_HOOK_FAILED = 1  # Claude Code: a hook's non-blocking error (2 would block a Stop)


def _hook_input(text: str) -> tuple[str, str]:
    """The ``transcript_path`` and ``session_id`` of a hook's JSON input."""
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"--hook reads the hook's JSON on stdin: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidInputError("--hook reads the hook's JSON object on stdin")
    found = []
    for name in ("transcript_path", "session_id"):
        value = document.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidInputError(f"the hook's JSON has no {name!r} (a non-empty string)")
        found.append(value)
    return found[0], found[1]


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _one_import_at_a_time(database: str, session: str | None) -> Iterator[None]:
    """Imports of one session into one database on this machine take turns (a file lock).

    Hooks can overlap (a ``Stop`` while the previous one still runs): without turns,
    both would read the same buffer and store the same new rows.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no lock (docs/import.md)
        yield
        return
    name = hashlib.sha256(f"{os.getuid()}\0{database}\0{session}".encode()).hexdigest()[:24]
    path = Path(tempfile.gettempdir()) / f"flowmem-import-{name}.lock"
    try:  # the caller's own file: never through a link another user planted
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise FlowmemError(f"cannot open the import's lock file {path}: {exc.strerror or exc} (nothing was imported)") from exc
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock


@click.group("import")
def import_group() -> None:
    """Import an agent's own transcript into a flowmem session (idempotent)."""


@import_group.command("claude-code")
@click.argument("transcript", required=False)
@click.option("--session", "session_id", metavar="ID", help="The flowmem session (default: the transcript's sessionId).")
@click.option("--user", "user_id", metavar="USER", help="The session's owner (default: an unowned session).")
@click.option("--key", default=BUFFER_KEY, show_default=True, help="The session buffer to import into.")
@click.option("--url", metavar="URL", help=f"Import into a flowmem server (default: ${URL_ENV} when no database is named); token: $FLOWMEM_TOKEN.")
@click.option("--hook", is_flag=True, help="Read a Claude Code hook's JSON on stdin; silent on success, exit 1 on failure.")
@click.option("--json", "as_json", is_flag=True, help="Print what was imported as JSON (not with --hook: silent).")
@database_option
def claude_code_command(
    transcript: str | None,
    session_id: str | None,
    user_id: str | None,
    key: str,
    url: str | None,
    hook: bool,
    as_json: bool,
    database: str | None,
) -> None:
    """Import a Claude Code session transcript (JSONL) into a flowmem session's buffer.

    The whole file is checked before anything is stored: a bad or truncated line is
    refused with its number, and nothing of the file is stored. Then only what the
    session lacks is stored (importing again, or a longer transcript, adds only the
    new lines), under the append rules: a tool call left without a result is healed
    when the next user turn arrives (MEM-3), and a compaction archives the rows its
    summary replaced. Sidechains (subagents' turns) are skipped.

    Into a database (--database, $FLOWMEM_DATABASE_URL, ./flowmem.db), or into a
    flowmem server (--url, else $FLOWMEM_URL when no database is named) as the user
    of $FLOWMEM_TOKEN.
    """
    if not hook:
        if transcript is None:
            raise click.UsageError("give the TRANSCRIPT file (or --hook to read a hook's JSON on stdin)")
        where = _where(database, url, user_id)
        _echo(_import(_read(transcript), session_id, user_id, key, where), as_json)
        return
    try:  # every failure of a hook is exit 1: Claude Code reads 2 as "block"
        if transcript is not None:
            raise click.UsageError("--hook reads the transcript's path from stdin: leave out TRANSCRIPT")
        where = _where(database, url, user_id)
        path, hook_session = _hook_input(sys.stdin.read(HOOK_INPUT_BYTES))
        _import(_read(path), session_id or hook_session, user_id, key, where)
    except (FlowmemError, click.ClickException) as exc:
        message = exc.message if isinstance(exc, FlowmemError) else exc.format_message()
        click.echo(f"flowmem import: error: {message}", err=True)
        sys.exit(EXIT_HOOK_FAILED)


def _where(database: str | None, url: str | None, user_id: str | None) -> tuple[str, bool]:
    """The database's URL or the server's, and whether it is a server."""
    if url is not None and database is not None:
        raise click.UsageError("give --database or --url, not both")
    if url is None and database is None and not os.environ.get(DATABASE_ENV):
        url = os.environ.get(URL_ENV) or None
    if url is None:
        return database or default_database_url(), False
    if user_id is not None:
        raise click.UsageError("--user is for a database: on a server the session is the token's user's")
    return url, True


def _client(url: str) -> Client:
    """The Python client of the server at ``url`` (its token from $FLOWMEM_TOKEN)."""
    from flowmem.client import Client

    return Client(url)


def _import(data: bytes, session_id: str | None, user_id: str | None, key: str, where: tuple[str, bool]) -> ImportResult:
    """Import under the session's lock; a database is created by the first import (a hook's first run)."""
    url, server = where
    with _one_import_at_a_time(url, session_id):
        target: ImportTarget
        if server:
            with _client(url) as client:
                target = client
                return import_claude_code(target, data, session_id=session_id, key=key)
        store = open_database(url, create=True)
        try:
            target = MemoryService(store)
            return import_claude_code(target, data, session_id=session_id, user_id=user_id, key=key)
        finally:
            store.close()


def _echo(result: ImportResult, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(result.skipped.items())) or "none"
    click.echo(
        f"session {result.session_id} buffer {result.key}: {result.lines_new} new lines, "
        f"{result.rows_stored} rows stored, {result.compactions} compactions, {result.count} rows live "
        f"(skipped: {skipped})"
    )
