"""``flowmem check`` and ``flowmem normalize``: the core rules on a JSON file."""

from __future__ import annotations

import json
import sys

import click

from flowmem.cli.io import read_json, read_message_list
from flowmem.core import check_sendable, normalize
from flowmem.formats import FORMATS, read_document, write_document


@click.command("check")
@click.argument("source", default="-")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Read SOURCE in this provider format (a message list or a request body) "
    "instead of flowmem rows.",
)
def check_command(source: str, fmt: str | None) -> None:
    """Print what a provider would reject in the message list SOURCE (a file or -).

    Exit 0 when sendable, 1 when there is any violation, 2 on unreadable input.
    """
    messages = read_message_list(source) if fmt is None else read_document(fmt, read_json(source))
    violations = check_sendable(messages)
    for violation in violations:
        click.echo(f"{violation.index}\t{violation.code}\t{violation.message}")
    if violations:
        click.echo(f"{len(violations)} violation(s)", err=True)
        sys.exit(1)
    click.echo("sendable: no violations", err=True)


@click.command("normalize")
@click.argument("source", default="-")
@click.option(
    "--to",
    "target",
    type=click.Choice(FORMATS),
    default=None,
    help="Print the normalized list in this provider format instead of flowmem flat rows.",
)
def normalize_command(source: str, target: str | None) -> None:
    """Print the normalized message list of SOURCE as JSON; the dropped count goes to stderr."""
    result = normalize(read_message_list(source))
    output = result.messages if target is None else write_document(target, result.messages)
    click.echo(json.dumps(output, ensure_ascii=False, indent=2))
    click.echo(f"dropped: {result.dropped}", err=True)
