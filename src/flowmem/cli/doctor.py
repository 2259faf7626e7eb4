"""``flowmem doctor``: check a database for damage and say what was found, and what to do."""

from __future__ import annotations

import click

from flowmem.cli.database import database_option, default_database_url, open_database, redact
from flowmem.errors import StoreCorruptError

ADVICE = (
    "What to do: stop the server; keep a copy of the damaged files; restore the last "
    "copy `flowmem backup` made (SQLite: put it in place of the file and remove the "
    "-wal and -shm files), or your PostgreSQL base backup or pg_dump. SQLite's own "
    "check: sqlite3 <file> 'PRAGMA integrity_check'. PostgreSQL: amcheck "
    "(bt_index_check) and the server's log."
)


def findings_of(url: str) -> list[str]:
    """What is damaged in the database at ``url`` (empty: nothing found)."""
    if url.startswith("sqlite:"):
        from flowmem.store.sqlite import parse_url
        from flowmem.store.sqlite.doctor import check_file

        return check_file(parse_url(url)[0])  # never opened as a store: no migration, no write
    store = open_database(url)
    try:
        check = getattr(store, "check_integrity", None)
        return [] if check is None else list(check())
    finally:
        store.close()


@click.command("doctor")
@database_option
def doctor_command(database: str | None) -> None:
    """Check the database for damage: SQLite's integrity check (or every PostgreSQL table
    read whole), every stored JSON text, every buffer's row count.

    Exits 0 when nothing is found, 9 (database damaged) with what was found and what
    to do otherwise. Read only: safe while the server runs.
    """
    url = database or default_database_url()
    findings = findings_of(url)
    if not findings:
        click.echo(f"{redact(url)}: no damage found")
        return
    for finding in findings:
        click.echo(finding)
    raise StoreCorruptError(f"{redact(url)} is damaged: {len(findings)} findings above. {ADVICE}")
