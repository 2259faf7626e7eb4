"""``flowmem repairs SCOPE SCOPE_ID KEY``: a buffer's repair log, newest first (issue 37 §2).

What the memory changed in the buffer besides adding rows, and when: MEM-3
placeholders inserted, MEM-10 placeholders replaced, MEM-1 / MEM-2 duplicates refused,
rows a window evicted or a compaction archived, entries a read's normalization
dropped, writes refused whole (``flowmem.store.repairs`` describes an entry).
Read straight from the database, as ``flowmem compact`` does (an operator's command);
over HTTP the same page is ``GET /v1/buffers/{scope}/{key}/repairs``.
"""

from __future__ import annotations

import json
import time

import click

from flowmem.cli.database import database_option, open_database
from flowmem.service import MemoryService
from flowmem.store.repairs import PAGE, PAGE_MAX


def _when(at: float) -> str:
    """An entry's time, UTC, to the millisecond."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


@click.command("repairs")
@click.argument("scope")
@click.argument("scope_id")
@click.argument("key")
@click.option("--limit", type=click.IntRange(0, PAGE_MAX), default=PAGE, show_default=True, help="Entries shown.")
@click.option("--before", type=click.IntRange(min=0), help="Only entries numbered below this one (the older page).")
@click.option("--json", "as_json", is_flag=True, help="Print the page as the API answers it.")
@database_option
def repairs_command(
    scope: str, scope_id: str, key: str, limit: int, before: int | None, as_json: bool, database: str | None
) -> None:
    """Print the repair log of buffer SCOPE/SCOPE_ID/KEY, newest first.

    One line per repair: its number, time (UTC), kind, rule, how many rows, the call
    ids and the row indexes (the rows a heal or a replacement wrote, in the buffer
    now; the rows an eviction or a compaction removed, before it). The log keeps a buffer's
    newest 1,000 repairs; it goes with the buffer, its session and its user.
    """
    store = open_database(database)
    try:
        page = MemoryService(store).repairs_raw(scope, scope_id, key, before=before, limit=limit)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(page.to_dict(), ensure_ascii=False, indent=2))
        return
    if not page.repairs:
        click.echo("no repairs")
        return
    for entry in page.repairs:
        rows = ",".join(str(p) for p in entry["positions"]) or "-"
        ids = ",".join(entry["call_ids"])
        head = f"#{entry['seq']}  {_when(entry['at'])}  {entry['kind']:9} {entry['rule']:10}  x{entry['count']}"
        click.echo(f"{head}  calls {ids or '-'}  rows {rows}")
    if page.next_before is not None:
        click.echo(f"older: --before {page.next_before}")
