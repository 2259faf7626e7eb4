"""``flowmem chat``: an interactive terminal chat with an agent on a local database.

Each line you type is a user turn of a session (new, or ``--session ID`` to resume
one), run by the same ``AgentRunner`` the server uses. Tool calls, their results,
healed placeholders (MEM-3) and late results replacing them (MEM-10) are shown as
they happen. The model is an OpenAI-compatible endpoint (``--model``/``--base-url``
or ``FLOWMEM_MODEL``/``FLOWMEM_MODEL_BASE_URL``) or, with ``--scripted``, a small
rule-based assistant that needs no provider.
"""

from __future__ import annotations

import json
import time
import uuid

import click
from rich.console import Console
from rich.markup import escape

from flowmem.cli.database import database_option, open_database
from flowmem.cli.demo import history_table
from flowmem.cli.io import FiniteFloatRange
from flowmem.core import result_id
from flowmem.errors import ConflictError, FlowmemError, NotFoundError
from flowmem.runtime.agent import MemorySpec
from flowmem.runtime.loop import TurnEvent, dangling_ids
from flowmem.runtime.models import Model, OpenAIChatModel
from flowmem.runtime.runner import AgentRunner
from flowmem.runtime.scripted import phrases_hint, scripted_assistant
from flowmem.runtime.serving import default_agent
from flowmem.scope import usable_identity
from flowmem.service import MemoryService
from flowmem.store.base import Address, SessionRecord, Store

HELP = "commands: /history  /help  /quit   (anything else is a user turn)"


class EventPrinter:
    """Prints a turn's events as they happen."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: TurnEvent) -> None:
        data, say = event.data, self.console.print
        if event.kind == "healed":
            cid = escape(str(result_id(data["row"])))
            say(
                f"[yellow]  healed: call {cid} had no result; answered with a placeholder (MEM-3)[/]"
            )
        elif event.kind == "tool_call":
            call = data["call"]
            args = escape(json.dumps(call.arguments, ensure_ascii=False, default=str))
            say(f"[cyan]  → {escape(call.name)}({args})[/] [dim]{escape(call.id)}[/]")
        elif event.kind == "tool_result":
            content = escape(str(data["row"]["content"]))
            if data.get("replaced"):
                say(
                    f"[green]  ← {content}[/] [yellow](real result replaced the placeholder, MEM-10)[/]"
                )
            elif data.get("reused"):
                say(
                    f"[green]  ← {content}[/] [dim](stored result reused; the tool did not run again)[/]"
                )
            else:
                style = "red" if data["row"]["metadata"].get("error") else "green"
                say(f"[{style}]  ← {content}[/]")
        elif event.kind == "assistant" and data["row"]["content"]:
            say(f"[bold magenta]assistant>[/] {escape(data['row']['content'])}")
        elif event.kind == "done":
            result = data["result"]
            if result.status == "failed":
                error = result.error or {}
                say(f"[red]  turn failed: {escape(str(error.get('message', 'error')))}[/]")
            elif result.reason != "answered":
                say(f"[dim]  turn ended: {result.reason}[/]")


def _model(scripted: bool, model: str | None, base_url: str | None, api_key: str | None) -> Model:
    if scripted:
        return scripted_assistant()
    return OpenAIChatModel(model, base_url, api_key)


def _session(store: Store, session_id: str | None, user: str | None, agent: str) -> SessionRecord:
    if session_id is not None:
        found = store.get_session(session_id)
        if found is None:
            raise NotFoundError(f"session {session_id} does not exist")
        return found
    owner = usable_identity(user) if user else None
    if user and owner is None:
        raise click.BadParameter(f"{user!r} is not a usable user id", param_hint="--user")
    now = time.time()
    record = SessionRecord(str(uuid.uuid4()), "chat", owner, "idle", agent, {}, now, now)
    return store.create_session(record)


@click.command("chat")
@database_option
@click.option("--session", "session_id", default=None, help="Resume this session id.")
@click.option(
    "--user",
    default="local-user",
    show_default=True,
    help="Owner of a new session: its user-scoped memory (MEM-8). Empty for an unowned session.",
)
@click.option("--scripted", is_flag=True, help="Use the built-in scripted assistant (no provider).")
@click.option("--model", default=None, help="Model name (default: $FLOWMEM_MODEL).")
@click.option(
    "--base-url",
    default=None,
    help="OpenAI-compatible base URL (default: $FLOWMEM_MODEL_BASE_URL).",
)
@click.option(
    "--api-key", default=None, help="API key (default: $FLOWMEM_API_KEY or $OPENAI_API_KEY)."
)
@click.option(
    "--window",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Conversation window; 0 = unlimited.",
)
@click.option(
    "--stale-after",
    default=10.0,
    show_default=True,
    type=FiniteFloatRange(min=0.1),
    help="Seconds after which a session left running by a crashed chat is released.",
)
def chat_command(
    database: str | None,
    session_id: str | None,
    user: str,
    scripted: bool,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    window: int,
    stale_after: float,
) -> None:
    """Chat with an agent in the terminal; every turn is stored and survives crashes."""
    console = Console(highlight=False)
    store = open_database(database, create=True)  # a chat writes its conversation
    try:
        agent = default_agent(_model(scripted, model, base_url, api_key))
        agent.memory = MemorySpec(max_messages=window)
        runner = AgentRunner(
            store,
            MemoryService(store),
            [agent],
            default_agent=agent.name,
            stale_after=stale_after,
            on_event=EventPrinter(console),
        )
        session = _session(store, session_id, user, agent.name)
        address = Address(agent.memory.scope, session.id, agent.memory.key)
        console.print(f"[bold]flowmem chat[/] session [cyan]{session.id}[/] on {escape(store.url)}")
        console.print(f"[dim]owner: {session.owner or '(none)'} — {HELP}[/]")
        if scripted:
            hint = escape(phrases_hint())
            console.print(f"[dim]scripted model, no provider — {hint}[/]", soft_wrap=True)
        pending = dangling_ids(store.load(address))
        if pending:
            console.print(
                f"[yellow]{len(pending)} tool call(s) of an interrupted turn have no result; "
                "your next message heals them (MEM-3).[/]"
            )
        try:
            _repl(console, runner, store, session, address)
        finally:
            runner.close()  # its turns stopped, the model's HTTP client closed
    finally:
        store.close()


def _repl(
    console: Console, runner: AgentRunner, store: Store, session: SessionRecord, address: Address
) -> None:
    while True:
        try:
            line = console.input("[bold blue]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            return
        if text == "/help":
            console.print(HELP)
            continue
        if text == "/history":
            console.print(history_table("conversation buffer", store.load(address)))
            continue
        try:
            runner.start_turn(session, text, wait=True)
        except ConflictError as exc:
            console.print(f"[red]{escape(exc.message)}[/] — try again in a moment.")
        except FlowmemError as exc:
            console.print(f"[red]error: {escape(exc.message)}[/]")
