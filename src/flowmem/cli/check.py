"""``flowmem check`` and ``flowmem normalize``: the core rules on a JSON file."""

from __future__ import annotations

import json
import sys

import click

from flowmem.cli.io import read_message_list
from flowmem.core import check_sendable, normalize


@click.command("check")
@click.argument("source", default="-")
def check_command(source: str) -> None:
    """Print what a provider would reject in the message list SOURCE (a file or -).

    Exit 0 when sendable, 1 when there is any violation, 2 on unreadable input.
    """
    violations = check_sendable(read_message_list(source))
    for violation in violations:
        click.echo(f"{violation.index}\t{violation.code}\t{violation.message}")
    if violations:
        click.echo(f"{len(violations)} violation(s)", err=True)
        sys.exit(1)
    click.echo("sendable: no violations", err=True)


@click.command("normalize")
@click.argument("source", default="-")
def normalize_command(source: str) -> None:
    """Print the normalized message list of SOURCE as JSON; the dropped count goes to stderr."""
    result = normalize(read_message_list(source))
    click.echo(json.dumps(result.messages, ensure_ascii=False, indent=2))
    click.echo(f"dropped: {result.dropped}", err=True)


def register(group: click.Group) -> None:
    """Add the commands of this module to the CLI group."""
    group.add_command(check_command)
    group.add_command(normalize_command)
