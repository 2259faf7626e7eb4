"""Reading JSON documents for CLI commands."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from flowmem.core import check_storable
from flowmem.errors import InvalidInputError


def read_json(source: str) -> Any:
    """Read a JSON document from a file path or ``-`` (stdin); raise InvalidInputError if unreadable.

    Text UTF-8 cannot encode (a lone surrogate) raises ``InvalidTextError`` (exit code 2).
    """
    try:
        if source == "-":
            text = sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {source}: {exc}") from exc
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidInputError(f"{source} is not valid JSON: {exc}") from exc
    check_storable(document, "input")
    return document


def read_message_list(source: str) -> list[Any]:
    """Read a JSON message list; an object with a ``messages`` list is accepted too."""
    document = read_json(source)
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        document = document["messages"]
    if not isinstance(document, list):
        raise InvalidInputError(f"{source} must hold a JSON list of messages")
    return document


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf`` (which compare as in range)."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, when it is finite and within the range; else a usage error."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number

