"""The ``flowmem`` command line: one group, one module per command family.

Commands are imported when they are used, so a plain ``pip install flowmem`` runs
``backup``, ``check``, ``normalize``, ``token`` and ``user`` without the extras
that ``serve``, ``chat`` and ``demo`` need; those name the extra to install
instead of crashing. ``flowmem --help`` imports none of them: it lists each
command's summary from ``COMMANDS`` and finds a missing extra by looking for the
modules the command needs (decision 0187).
"""

from __future__ import annotations

import importlib
import importlib.util
from gettext import gettext as _
from typing import NamedTuple

import click

from flowmem import __version__
from flowmem.cli.errors import run_guarded


class Entry(NamedTuple):
    """Where a command lives, the extra its dependencies come from, and what its listing shows.

    ``summary`` is the first paragraph of the command's help (what ``flowmem --help``
    shortens); ``needs`` the top-level modules whose absence makes the command's module
    fail to import (the roots of its extra's packages that it imports; each pulls in
    the rest). tests/cli/test_listing.py proves both against the imported commands.
    """

    module: str
    attribute: str
    extra: str | None
    summary: str
    needs: tuple[str, ...] = ()


RUNTIME = ("httpx", "jsonschema")  # flowmem.runtime's packages (the runtime extra)

# command name -> its entry
COMMANDS: dict[str, Entry] = {
    "backup": Entry("flowmem.cli.backup", "backup_command", None,
                    "Copy the SQLite database to DESTINATION, a new file, while it is in use."),
    "chat": Entry("flowmem.cli.chat", "chat_command", "runtime",
                  "Chat with an agent in the terminal; every turn is stored and survives crashes.", RUNTIME),
    "compact": Entry("flowmem.cli.compact", "compact_command", None,
                     "Replace the oldest rows of buffer SCOPE/SCOPE_ID/KEY beyond --keep-tokens by one summary."),
    "check": Entry("flowmem.cli.check", "check_command", None,
                   "Print what a provider would reject in the message list SOURCE (a file or -)."),
    "demo": Entry("flowmem.cli.demo", "demo_command", "runtime",
                  "Crash an agent mid tool call (SIGKILL), restart it, and show the history healed.", RUNTIME),
    "doctor": Entry("flowmem.cli.doctor", "doctor_command", None,
                    "Check the database for damage: SQLite's integrity check (or every PostgreSQL table "
                    "read whole), every stored JSON text, every buffer's row count."),
    "import": Entry("flowmem.cli.imports", "import_group", None,
                    "Import an agent's own transcript into a flowmem session (idempotent)."),
    "mcp": Entry("flowmem.cli.mcp", "mcp_command", "mcp",
                 "Serve flowmem's memory tools to an MCP client over stdio (docs/mcp.md).", ("mcp",)),
    "normalize": Entry("flowmem.cli.check", "normalize_command", None,
                       "Print the normalized message list of SOURCE as JSON; the dropped count goes to stderr."),
    "repairs": Entry("flowmem.cli.repairs", "repairs_command", None,
                     "Print the repair log of buffer SCOPE/SCOPE_ID/KEY, newest first."),
    "reembed": Entry("flowmem.cli.reembed", "reembed_command", "langgraph",
                     "Re-embed every FlowmemStore vector of the database with a new model, then switch to it."),
    "serve": Entry("flowmem.cli.serve", "serve_command", "server",
                   "Serve the HTTP API on uvicorn (default database: ./flowmem.db).", ("fastapi", "uvicorn")),
    "token": Entry("flowmem.cli.token", "token_group", None, "Create, list and revoke API tokens."),
    "user": Entry("flowmem.cli.user", "user_group", None, "Manage what is stored for a user."),
}  # fmt: skip


def _hint(extra: str | None) -> str:
    """What to install for a command whose dependencies are missing."""
    return f"pip install '<checkout>[{extra}]'" if extra else "reinstall flowmem"


def _needs_extra(name: str, extra: str | None, error: ImportError) -> click.Command:
    """A command standing in for one whose optional dependencies are not installed."""
    hint = _hint(extra)
    message = f"'flowmem {name}' needs {error.name or 'a missing package'}: {hint}"

    def fail(args: tuple[str, ...]) -> None:
        raise click.UsageError(message)

    # any options and arguments: `flowmem chat --scripted` names the extra, not the option
    return click.Command(
        name,
        callback=fail,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=message,
        short_help=f"(needs {hint})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


def installed(module: str) -> bool:
    """Whether a top-level module can be found, without importing it (None in sys.modules: blocked)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def listing_entry(name: str) -> click.Command:
    """What ``flowmem --help`` lists for a command, without importing it: its summary, or the extra it needs."""
    entry = COMMANDS[name]
    if all(installed(module) for module in entry.needs):
        return click.Command(name, help=entry.summary)
    return click.Command(name, short_help=f"(needs {_hint(entry.extra)})")


class LazyGroup(click.Group):
    """A click group that imports each command's module only when it is needed."""

    lists_lazily = True  # the seam: False lists each command by importing it (the plain path)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return every command name, sorted."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return the command, or a stand-in naming the missing extra."""
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        try:
            module = importlib.import_module(entry.module)
        except ImportError as exc:
            if exc.name is None or exc.name.startswith("flowmem"):
                raise
            return _needs_extra(cmd_name, entry.extra, exc)
        command: click.Command = getattr(module, entry.attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands with their summaries, as click would, from ``COMMANDS`` (no command imported)."""
        if not self.lists_lazily:
            super().format_commands(ctx, formatter)
            return
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, listing_entry(name).get_short_help_str(limit)) for name in names]
        with formatter.section(_("Commands")):  # click's own title, translated as click does
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flowmem")
def cli() -> None:
    """flowmem: conversation memory that keeps every history provider-sendable."""


def main() -> None:
    """Console-script entry point: run the CLI, mapping flowmem errors to exit codes."""
    run_guarded(cli)
