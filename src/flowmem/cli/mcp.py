"""``flowmem mcp``: the Model Context Protocol server on stdio, for a client's ``command`` configuration.

Over a local database (``--database`` or ``$FLOWMEM_DATABASE_URL``, else ./flowmem.db,
made when missing), every call acting as ``--user`` (``$FLOWMEM_USER``, else
``local-user``); or, with ``$FLOWMEM_URL`` and ``$FLOWMEM_TOKEN`` (``--url``,
``--token``), as a bridge to that server's ``/mcp``, every call acting as the
token's user there. stdout carries the protocol only. docs/mcp.md.
"""

from __future__ import annotations

import os

import click

from flowmem.cli.database import database_option, open_database
from flowmem.errors import ConfigurationError
from flowmem.mcp.bridge import serve_bridge  # needs the `mcp` extra: else the command names it
from flowmem.mcp.stdio import serve_stdio

USER_ENV = "FLOWMEM_USER"
URL_ENV = "FLOWMEM_URL"
TOKEN_ENV = "FLOWMEM_TOKEN"
DEFAULT_USER = "local-user"


@click.command("mcp")
@database_option
@click.option(
    "--user",
    default=None,
    help=f"Whose memory the tools keep on a local database (default: ${USER_ENV}, else {DEFAULT_USER}).",
)
@click.option("--url", default=None, help=f"A flowmem server to bridge to (default: ${URL_ENV}).")
@click.option("--token", default=None, help=f"Its Bearer token (default: ${TOKEN_ENV}).")
def mcp_command(database: str | None, user: str | None, url: str | None, token: str | None) -> None:
    """Serve flowmem's memory tools to an MCP client over stdio (docs/mcp.md)."""
    url = url or os.environ.get(URL_ENV) or None
    if url:
        token = token or os.environ.get(TOKEN_ENV) or None
        if not token:
            raise ConfigurationError(f"bridging to {url} needs a token: set ${TOKEN_ENV} (flowmem token create)")
        if database or user:
            raise click.UsageError("--database and --user are for a local database, not with --url")
        serve_bridge(url, token)
        return
    store = open_database(database, create=True)
    serve_stdio(store, user or os.environ.get(USER_ENV) or DEFAULT_USER)
