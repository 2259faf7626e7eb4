"""``flowmem user erase``: delete everything stored for one user id."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from flowmem.cli.database import database_option, open_database
from flowmem.errors import InvalidInputError
from flowmem.scope import stored_spellings
from flowmem.sessions import erase_user_data


@click.group("user")
def user_group() -> None:
    """Manage what is stored for a user."""


@user_group.command("erase")
@click.argument("user_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@database_option
def erase_command(user_id: str, yes: bool, database: str | None) -> None:
    """Erase USER_ID: its sessions (transcripts, session scopes), its user scope and its tokens.

    One transaction; refused while one of its sessions is running a turn. Prints
    what was deleted as JSON. A placeholder such as ``None`` is no usable id, but the
    data stored under it before decision 0016 is erased too.
    """
    if not stored_spellings(user_id):
        raise InvalidInputError(
            f"user id {user_id!r} is not a usable identity (1-255 characters, no whitespace, "
            "not 0 or a non-positive integer): it owns nothing",
            field="user_id",
        )
    if not yes:
        click.confirm(f"Erase everything stored for user {user_id!r}?", abort=True, err=True)
    store = open_database(database)
    try:
        canonical, erased = erase_user_data(store, user_id)
    finally:
        store.close()
    click.echo(json.dumps({"user_id": canonical, **asdict(erased)}))
