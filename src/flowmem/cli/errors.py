"""Map flowmem errors to one-line CLI messages and exit codes (the CLI's error table)."""

from __future__ import annotations

import sys

import click

from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    ConflictError,
    FlowmemError,
    NotFoundError,
    StoreCorruptError,
    StoreFullError,
    StoreReadOnlyError,
)

# Exit codes: 0 success, 1 "the answer is no" (e.g. violations found),
# 2 bad input or usage, 3 not found, 4 denied, 5 conflict, 6 storage or provider failure,
# 7 storage full, 8 database read-only, 9 database damaged, 10 cannot listen (the
# server's address is in use or cannot be bound).
EXIT_CODES: list[tuple[type[FlowmemError], int]] = [
    (NotFoundError, 3),
    (AuthenticationError, 4),
    (AccessDeniedError, 4),
    (ConflictError, 5),
    (StoreFullError, 7),
    (StoreReadOnlyError, 8),
    (StoreCorruptError, 9),
]
EXIT_INPUT = 2
EXIT_FAILURE = 6
EXIT_CANNOT_LISTEN = 10


class CannotListenError(click.ClickException):
    """``flowmem serve`` cannot bind its address (e.g. the port is in use): exit code 10."""

    exit_code = EXIT_CANNOT_LISTEN


def exit_code_for(error: FlowmemError) -> int:
    """Return the exit code for a flowmem error."""
    from flowmem.errors import InvalidInputError

    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INPUT if isinstance(error, InvalidInputError) else EXIT_FAILURE


def run_guarded(command: click.Command) -> None:
    """Run a click command; a FlowmemError becomes ``error: …`` on stderr and its exit code."""
    try:
        command.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except FlowmemError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exit_code_for(exc))
    except BrokenPipeError:
        sys.exit(0)
