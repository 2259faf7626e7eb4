"""``flowmem demo``: a crashed tool call healed by the next user turn, then normalized."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from flowmem.core import append, check_sendable, normalize


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("#", "role", "content", "tool data"):
        table.add_column(column)
    for index, row in enumerate(rows):
        meta = row.get("metadata") or {}
        tool = {k: v for k, v in meta.items() if k in ("tool_calls", "tool_call_id", "healed")}
        tool.update({k: row[k] for k in ("tool_calls", "tool_call_id") if k in row})
        style = "yellow" if meta.get("healed") else None
        table.add_row(
            str(index), row["role"], row["content"], json.dumps(tool) if tool else "", style=style
        )
    return table


@click.command("demo")
def demo_command() -> None:
    """Show a history broken by a crash being healed (MEM-3) and normalized (MEM-5)."""
    console = Console()
    buffer: list[dict[str, Any]] = []
    for message in (
        {"role": "user", "content": "What's the weather in Lisbon?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "weather"}]},
    ):
        buffer = append(buffer, message).messages
    console.print(_table("1. The agent crashed while its tool call was running", buffer))
    problems = check_sendable(buffer)
    console.print(
        f"   a provider would reject it: [red]{problems[0].code}[/red] at index {problems[0].index}"
    )

    retried = append(
        buffer,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "weather"}]},
    )
    console.print(
        f"2. A retry re-sends the same assistant turn: appended={retried.appended} (MEM-2)"
    )

    healed = append(retried.messages, {"role": "user", "content": "Hello? Still there?"})
    console.print(
        _table("3. The next user turn heals the dangling call in place (MEM-3)", healed.messages)
    )

    late = append(
        healed.messages, {"role": "tool", "content": "18°C, sunny", "tool_call_id": "call_1"}
    )
    console.print(
        _table(
            "4. The real result arrives late and replaces the placeholder (MEM-10)", late.messages
        )
    )

    messy = [
        {"role": "tool", "content": "stray", "tool_call_id": "x"},
        *late.messages,
        {"role": "system", "content": "Be brief."},
    ]
    result = normalize(messy)
    console.print(
        _table(
            f"5. normalize() on a messy copy: dropped={result.dropped}, system moved first (MEM-5)",
            result.messages,
        )
    )
    verdict = "sendable" if not check_sendable(result.messages) else "NOT sendable"
    console.print(f"[green]check_sendable: {verdict}[/green]")


def register(group: click.Group) -> None:
    """Add the commands of this module to the CLI group."""
    group.add_command(demo_command)
