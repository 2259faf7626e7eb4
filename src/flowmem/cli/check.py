"""``flowmem check`` and ``flowmem normalize``: the core rules on a JSON file."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from flowmem.cli.io import read_json
from flowmem.core import normalize
from flowmem.formats import DETECTED, FORMATS, check_payload, read_payload, write_document

_FROM_HELP = (
    "Read SOURCE in this format: flowmem rows or a provider's message list or request "
    "body. Detected from the payload when absent."
)


def _read(source: str, fmt: str | None) -> tuple[str, list[Any]]:
    """Return ``(format, messages)`` of SOURCE: rows as given, a provider payload converted.

    An explicit format that the payload plainly is not (a provider payload read as
    rows, or as another provider) is refused, so nothing is misread and written back.
    """
    return read_payload(read_json(source), fmt, source)


def _announce(fmt: str, given: str | None) -> None:
    if given is None and fmt != "rows":
        click.echo(f"format: {fmt} (detected)", err=True)


@click.command("check")
@click.argument("source", default="-")
@click.option("--from", "fmt", type=click.Choice(DETECTED), default=None, help=_FROM_HELP)
@click.option("--format", "legacy", type=click.Choice(FORMATS), default=None, hidden=True)
def check_command(source: str, fmt: str | None, legacy: str | None) -> None:
    """Print what a provider would reject in the message list SOURCE (a file or -).

    Each violation's index is the position of its entry in the list SOURCE holds
    (a message, or a Responses item). A provider format is checked as that provider
    judges it (OpenAI's APIs take system messages anywhere); flowmem rows against
    MEM-5. Exit 0 when sendable, 1 when there is any violation, 2 on unreadable input.
    """
    given = fmt or legacy
    found, violations = check_payload(read_json(source), given, source)
    _announce(found, given)
    for violation in violations:
        click.echo(f"{violation.index}\t{violation.code}\t{violation.message}")
    if violations:
        click.echo(f"{len(violations)} violation(s)", err=True)
        sys.exit(1)
    click.echo("sendable: no violations", err=True)


@click.command("normalize")
@click.argument("source", default="-")
@click.option("--from", "fmt", type=click.Choice(DETECTED), default=None, help=_FROM_HELP)
@click.option(
    "--to",
    "target",
    type=click.Choice(DETECTED),
    default=None,
    help="Print the normalized list in this format (default: the format read).",
)
def normalize_command(source: str, fmt: str | None, target: str | None) -> None:
    """Print the normalized message list of SOURCE as JSON; the dropped count goes to stderr.

    Content parts are kept (decision 0021). What the target format cannot carry
    from another provider is left out and listed on stderr.
    """
    found, messages = _read(source, fmt)
    _announce(found, fmt)
    result = normalize(messages, keep_content=True)
    target = target or found
    not_carried: dict[str, int] = {}
    output: Any
    if target == "rows":
        output = result.messages
    else:
        output = write_document(target, result.messages, not_carried)
    click.echo(json.dumps(output, ensure_ascii=False, indent=2))
    click.echo(f"dropped: {result.dropped}", err=True)
    if not_carried:
        kinds = ", ".join(f"{kind}={count}" for kind, count in sorted(not_carried.items()))
        click.echo(f"not carried by {target}: {kinds}", err=True)

