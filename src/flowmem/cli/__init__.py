"""The ``flowmem`` command line: one group, one module per command family.

Commands are imported when they are used, so a plain ``pip install flowmem`` runs
``backup``, ``check``, ``normalize``, ``token`` and ``user`` without the extras
that ``serve``, ``chat`` and ``demo`` need; those name the extra to install
instead of crashing.
"""

from __future__ import annotations

import importlib

import click

from flowmem import __version__
from flowmem.cli.errors import run_guarded

# command name -> (module, attribute, the extra its dependencies come from)
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "backup": ("flowmem.cli.backup", "backup_command", None),
    "chat": ("flowmem.cli.chat", "chat_command", "runtime"),
    "compact": ("flowmem.cli.compact", "compact_command", None),
    "check": ("flowmem.cli.check", "check_command", None),
    "demo": ("flowmem.cli.demo", "demo_command", "runtime"),
    "doctor": ("flowmem.cli.doctor", "doctor_command", None),
    "import": ("flowmem.cli.imports", "import_group", None),
    "mcp": ("flowmem.cli.mcp", "mcp_command", "mcp"),
    "normalize": ("flowmem.cli.check", "normalize_command", None),
    "repairs": ("flowmem.cli.repairs", "repairs_command", None),
    "reembed": ("flowmem.cli.reembed", "reembed_command", "langgraph"),
    "serve": ("flowmem.cli.serve", "serve_command", "server"),
    "token": ("flowmem.cli.token", "token_group", None),
    "user": ("flowmem.cli.user", "user_group", None),
}


def _needs_extra(name: str, extra: str | None, error: ImportError) -> click.Command:
    """A command standing in for one whose optional dependencies are not installed."""
    hint = f"pip install '<checkout>[{extra}]'" if extra else "reinstall flowmem"
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


class LazyGroup(click.Group):
    """A click group that imports each command's module only when it is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return every command name, sorted."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return the command, or a stand-in naming the missing extra."""
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, extra = entry
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if exc.name is None or exc.name.startswith("flowmem"):
                raise
            return _needs_extra(cmd_name, extra, exc)
        command: click.Command = getattr(module, attribute)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flowmem")
def cli() -> None:
    """flowmem: conversation memory that keeps every history provider-sendable."""


def main() -> None:
    """Console-script entry point: run the CLI, mapping flowmem errors to exit codes."""
    run_guarded(cli)
