"""``flowmem backup DEST``: a consistent copy of a live SQLite database."""

from __future__ import annotations

import click

from flowmem.cli.database import database_option, open_database, redact
from flowmem.errors import InvalidInputError
from flowmem.store.base import SupportsBackup


@click.command("backup")
@click.argument("destination", type=click.Path(dir_okay=False))
@database_option
def backup_command(destination: str, database: str | None) -> None:
    """Copy the SQLite database to DESTINATION, a new file, while it is in use.

    The copy holds every write committed before it started; the server keeps
    serving meanwhile. To restore, stop the server and put the copy in place of
    the database file. PostgreSQL is backed up with its own tools (pg_dump).
    """
    store = open_database(database)
    try:
        if not isinstance(store, SupportsBackup) or store.url.startswith("memory://"):
            raise InvalidInputError(
                f"flowmem backup copies SQLite databases, not {redact(store.url)}: "
                "back up PostgreSQL with pg_dump (memory:// keeps nothing past its process)"
            )
        size = store.backup(destination)
    finally:
        store.close()
    click.echo(f"backed up {redact(store.url)} to {destination} ({size} bytes)")
