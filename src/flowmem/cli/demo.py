"""``flowmem demo``: an agent killed with SIGKILL mid tool call, restarted, and healed.

A scripted agent runs in a CHILD PROCESS on a temporary SQLite database and calls
two tools in parallel; the demo kills the child with SIGKILL while the second tool
is running. A new runner (standing in for the restarted process) releases the
session the dead process left ``running``, sends the next user turn, and shows the
history healed in place (MEM-3) and accepted by a provider's check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowmem.core import check_sendable
from flowmem.errors import FlowmemError
from flowmem.runtime import demo as agent_demo
from flowmem.runtime.loop import TurnEvent
from flowmem.runtime.models import ModelReply
from flowmem.store import open_store
from flowmem.store.base import Address, SessionRecord, Store

CHILD_TIMEOUT = 30.0


def history_table(title: str, rows: list[dict[str, Any]]) -> Table:
    """A table of message rows; healed placeholders are highlighted."""
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in ("#", "role", "content", "tool data"):
        table.add_column(column)
    for index, row in enumerate(rows):
        meta = row.get("metadata") or {}
        tool = {k: v for k, v in meta.items() if k in ("tool_calls", "tool_call_id", "healed")}
        tool.update({k: row[k] for k in ("tool_calls", "tool_call_id") if k in row})
        style = "yellow" if meta.get("healed") else None
        data = json.dumps(tool, ensure_ascii=False) if tool else ""
        table.add_row(str(index), row["role"], escape(row["content"]), escape(data), style=style)
    return table


def _verdict(rows: list[dict[str, Any]]) -> str:
    problems = check_sendable(rows)
    if not problems:
        return "[green]check_sendable: sendable (no violations)[/]"
    listed = ", ".join(f"{p.code} at index {p.index}" for p in problems)
    return f"[red]a provider would reject it: {listed}[/]"


def _run_child(console: Console, db: Path, session: SessionRecord, workdir: Path) -> int:
    """Start the child, wait until the slow tool runs, SIGKILL it; return its pid."""
    # stderr goes to a file, not a pipe: nobody reads a pipe while the child runs (a full one
    # would stall it), and the file is closed here whichever way the child ends
    errors = workdir / "child.stderr"
    with (
        errors.open("w", encoding="utf-8") as err_file,
        subprocess.Popen(
            [sys.executable, "-m", "flowmem.runtime.demo", str(db), session.id, str(workdir)],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        ) as child,
    ):
        marker = workdir / "forecast.started"
        deadline = time.monotonic() + CHILD_TIMEOUT
        while not marker.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                child.wait()
                err = errors.read_text(encoding="utf-8", errors="replace")
                raise click.ClickException(
                    f"the demo child did not reach the tool call: {err[-2000:]}"
                )
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    console.print(
        f"   killed the child (pid {child.pid}) with [bold red]SIGKILL[/] while "
        f"[cyan]forecast[/] ({agent_demo.FORECAST_CALL.id}) was running: exit {child.returncode}"
    )
    return child.pid


def _wait_released(console: Console, store: Store, session: SessionRecord, workdir: Path) -> None:
    """Wait (a second or so) until the dead child's lease expires, then release the session."""
    probe = agent_demo.demo_runner(store, workdir, [])
    deadline = time.monotonic() + 10 * agent_demo.STALE_AFTER
    while True:
        current = store.get_session(session.id)
        if current is None:
            raise click.ClickException("the demo session disappeared")
        if probe.release_if_stale(current):
            break
        if time.monotonic() > deadline:
            raise click.ClickException("the dead child's session was never released")
        time.sleep(0.1)
    console.print(
        f"   its heartbeat stopped, so after {agent_demo.STALE_AFTER:.0f}s the session "
        "it left [bold]running[/] is released to [bold]failed[/]"
    )


def _recovery_turn(
    console: Console, store: Store, session: SessionRecord, workdir: Path
) -> list[TurnEvent]:
    """Run the next user turn in this process; the model retries the interrupted call once."""
    script = [
        ModelReply("", (agent_demo.FORECAST_CALL,)),  # the model retries the interrupted call
        "It's 18°C and sunny in Lisbon. The forecast lookup was interrupted; ask again?",
    ]
    events: list[TurnEvent] = []
    runner = agent_demo.demo_runner(store, workdir, script)
    runner.on_event = events.append
    current = store.get_session(session.id) or session
    result = runner.start_turn(current, agent_demo.NEXT_QUESTION, wait=True)
    if result["status"] != "completed":
        error = result.get("error", {})
        raise click.ClickException(f"the recovery turn failed: {error.get('message', result)}")
    return events


@click.command("demo")
def demo_command() -> None:
    """Crash an agent mid tool call (SIGKILL), restart it, and show the history healed."""
    console = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="flowmem-demo-") as tmp:
        workdir = Path(tmp)
        db = workdir / "demo.db"
        store = open_store(f"sqlite:///{db}")
        try:
            _demo(console, store, db, workdir)
        except FlowmemError as exc:
            raise click.ClickException(exc.message) from exc
        finally:
            store.close()


def _demo(console: Console, store: Store, db: Path, workdir: Path) -> None:
    now = time.time()
    session = store.create_session(
        SessionRecord(
            str(uuid.uuid4()), "demo", "demo-user", "idle", agent_demo.AGENT, {}, now, now
        )
    )
    address = Address("session", session.id, "chat_history")
    console.print(f"[bold]flowmem demo[/] — SQLite database {db}")
    console.print(
        f"1. A child process runs the agent: [italic]{escape(agent_demo.FIRST_QUESTION)}[/]\n"
        "   The model calls two tools in parallel: weather (instant) and forecast (slow)."
    )
    _run_child(console, db, session, workdir)

    crashed = store.load(address)
    status = store.get_session(session.id)
    console.print(history_table("   The buffer the dead process left behind", crashed))
    console.print(f"   session status: [bold]{status.status if status else '?'}[/]")
    console.print("   " + _verdict(crashed))

    console.print("2. Restart: a new process opens the same database.")
    _wait_released(console, store, session, workdir)
    console.print(f"3. The user sends the next turn: [italic]{agent_demo.NEXT_QUESTION}[/]")
    events = _recovery_turn(console, store, session, workdir)

    healed = store.load(address)
    console.print(
        history_table("   The healed buffer: a placeholder right after the call (MEM-3)", healed)
    )
    retried = next(e for e in events if e.kind == "assistant")
    console.print(
        f"   The model retried {agent_demo.FORECAST_CALL.id}: appended={retried.data['appended']} "
        "(MEM-2); forecast started before the crash, so it is not run again "
        f"(forecast ran {agent_demo.executions(workdir, 'forecast')} time, "
        f"weather {agent_demo.executions(workdir, 'weather')} time)."
    )
    requests = [e.data["messages"] for e in events if e.kind == "model_request"]
    for number, messages in enumerate(requests, 1):
        console.print(
            f"   request {number} to the model ({len(messages)} messages): " + _verdict(messages)
        )
    final = store.get_session(session.id)
    console.print(
        f"   session status: [bold]{final.status if final else '?'}[/]; the provider accepted "
        f"all {len(requests)} requests after the crash."
    )
