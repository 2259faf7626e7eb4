"""The ``flowmem`` command line: one group, one module per command family."""

from __future__ import annotations

import click

from flowmem import __version__
from flowmem.cli.errors import run_guarded


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flowmem")
def cli() -> None:
    """flowmem: conversation memory that keeps every history provider-sendable."""


def _register() -> None:
    from flowmem.cli import chat, check, demo, serve, token

    for module in (check, demo, token, serve, chat):
        module.register(cli)


_register()


def main() -> None:
    """Console-script entry point: run the CLI, mapping flowmem errors to exit codes."""
    run_guarded(cli)
