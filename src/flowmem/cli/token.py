"""``flowmem token create|list|revoke``: API tokens (only their hashes are stored)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from flowmem.access import PERM_ADMIN, PERMISSIONS
from flowmem.auth import DEFAULT_PERMISSIONS, create_token, revoke_token
from flowmem.cli.database import database_option, open_database, redact
from flowmem.errors import DatabaseNotFoundError


@click.group("token")
def token_group() -> None:
    """Create, list and revoke API tokens."""


@token_group.command("create")
@click.option(
    "--user",
    "user_id",
    default=None,
    help="User id the token acts as (omit for a service principal).",
)
@click.option("--admin", is_flag=True, help="Grant the admin permission (everything).")
@click.option(
    "--permission",
    "permissions",
    multiple=True,
    type=click.Choice(sorted(PERMISSIONS)),
    help="Grant a permission (repeatable). Without any, the token gets sessions:create.",
)
@click.option("--label", default="", help="A note shown by `token list`.")
@database_option
def create_command(
    user_id: str | None, admin: bool, permissions: tuple[str, ...], label: str, database: str | None
) -> None:
    """Create a token and print it once (only its hash is stored)."""
    chosen = set(permissions) or set(DEFAULT_PERMISSIONS)
    if admin:
        chosen.add(PERM_ADMIN)
    try:
        store = open_database(database)
    except DatabaseNotFoundError:  # a token made before the first start (docs/guide.md)
        store = open_database(database, create=True)
        click.echo(f"created a new flowmem database at {redact(store.url)}", err=True)
    try:
        token, record = create_token(store, user_id, chosen, label=label)
    finally:
        store.close()
    click.echo(token)
    who = f"user {record.user_id}" if record.user_id else "a service principal (no user)"
    click.echo(
        f"token {record.id} for {who}; permissions: {', '.join(sorted(record.permissions)) or '-'}",
        err=True,
    )
    click.echo("store it now: it is not shown again", err=True)


@token_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@database_option
def list_command(as_json: bool, database: str | None) -> None:
    """List tokens (ids, users, permissions; never the tokens themselves)."""
    store = open_database(database)
    try:
        records = store.list_tokens()
    finally:
        store.close()
    for record in records:
        perms = sorted(record.permissions)
        item = {
            "id": record.id,
            "user_id": record.user_id,
            "permissions": perms,
            "created_at": datetime.fromtimestamp(record.created_at, UTC).isoformat(),
            "revoked": record.revoked,
            "label": record.label,
        }
        if as_json:
            click.echo(json.dumps(item))
        else:
            state = "revoked" if record.revoked else "active"
            click.echo(
                f"{record.id}\t{record.user_id or '-'}\t{','.join(perms) or '-'}"
                f"\t{state}\t{item['created_at']}\t{record.label}"
            )


@token_group.command("revoke")
@click.argument("token_id")
@database_option
def revoke_command(token_id: str, database: str | None) -> None:
    """Revoke the token TOKEN_ID; requests with it get 401 from then on."""
    store = open_database(database)
    try:
        revoke_token(store, token_id)
    finally:
        store.close()
    click.echo(f"revoked {token_id}", err=True)
