"""``flowmem compact SCOPE SCOPE_ID KEY``: replace a buffer's oldest rows by a summary, archived (issue 28 §2).

The summary is a model call the CLI does not make: ``--summarize-with CMD`` runs a
command of the caller's with the rows to archive as JSON on its stdin and takes
its stdout as the summary; or the two steps by hand, as over HTTP:
``--plan-only`` prints the plan (the rows and the plan's id), ``--plan ID
--summary TEXT`` applies it if its rows are unchanged (exit 5 otherwise).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import click

from flowmem.cli.database import database_option, open_database
from flowmem.core import Message
from flowmem.core.compaction import parse_plan_id
from flowmem.errors import InvalidInputError, ModelError
from flowmem.service import MemoryService
from flowmem.service.checks import checked_address

SUMMARIZE_TIMEOUT = 600.0  # seconds a summarize command may take


def _summarize_with(command: str) -> Callable[[list[Message]], str]:
    """A summarizer running ``command`` (a shell command line): rows as JSON in, summary text out."""

    def summarize(rows: list[Message]) -> str:
        done = subprocess.run(
            command,
            shell=True,
            input=json.dumps(rows, ensure_ascii=False),
            capture_output=True,
            text=True,
            timeout=SUMMARIZE_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise ModelError(
                f"the summarize command exited with {done.returncode}: {done.stderr.strip()[:500]} "
                "(nothing was compacted)"
            )
        return done.stdout.strip()

    return summarize


def _echo(result: Any) -> None:
    click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))


@click.command("compact")
@click.argument("scope")
@click.argument("scope_id")
@click.argument("key")
@click.option("--keep-tokens", type=click.IntRange(min=0), help="Tokens the newest rows keep.")
@click.option("--summarize-with", "command", metavar="CMD", help="Rows as JSON on stdin, summary on stdout.")
@click.option("--plan-only", is_flag=True, help="Print the plan (rows and id); change nothing.")
@click.option("--plan", "plan_id", metavar="ID", help="Apply this plan (from --plan-only) with --summary.")
@click.option("--summary", metavar="TEXT", help="The summary of the plan's rows (with --plan).")
@database_option
def compact_command(
    scope: str,
    scope_id: str,
    key: str,
    keep_tokens: int | None,
    command: str | None,
    plan_only: bool,
    plan_id: str | None,
    summary: str | None,
    database: str | None,
) -> None:
    """Replace the oldest rows of buffer SCOPE/SCOPE_ID/KEY beyond --keep-tokens by one summary.

    The rows are archived, not deleted: `GET …?archived=true` and
    `load(..., include_archived=True)` read them until the buffer is cleared, its
    session deleted or its user erased. Counts with the default token counter.
    Prints what was archived (or the plan) as JSON.
    """
    checked_address(scope, scope_id, key)  # refused first
    if plan_id is not None:
        if summary is None or command is not None or plan_only:
            raise InvalidInputError("--plan applies a plan with --summary TEXT (and nothing else)")
        parse_plan_id(plan_id)  # refused before the database is opened
    elif keep_tokens is None or (command is None) == (not plan_only):
        raise InvalidInputError(
            "say --keep-tokens N with --summarize-with CMD or --plan-only "
            "(or apply a plan with --plan ID --summary TEXT)"
        )
    store = open_database(database)
    try:
        service = MemoryService(store)
        if plan_id is not None:
            _echo(service.apply_compaction_raw(scope, scope_id, key, plan_id, summary))
        elif plan_only:
            _echo(service.compaction_plan_raw(scope, scope_id, key, keep_tokens or 0))
        else:
            _echo(
                service.compact_raw(
                    scope, scope_id, key, keep_tokens=keep_tokens or 0, summarize=_summarize_with(str(command))
                )
            )
    finally:
        store.close()
