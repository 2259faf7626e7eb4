"""LangGraph's operations checked before any storage is touched, and matched as ``InMemoryStore`` matches.

The namespace, key, counts, TTL and filter of an op are refused here
(``InvalidInputError``, ``NamespaceError``) so that a refused op calls no store method;
``matches`` and ``does_match`` are ``InMemoryStore``'s filter and namespace semantics.
"""

from __future__ import annotations

import math
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition, Op, validate_op_namespace

from flowmem.errors import ConfigurationError, InvalidInputError
from flowmem.integrations.langgraph.namespaces import NamespaceError
from flowmem.service import check_ttl

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def check_namespace(namespace: object, what: str) -> tuple[str, ...]:
    """Return ``namespace`` when it is a tuple; NamespaceError otherwise."""
    if not isinstance(namespace, tuple):
        raise NamespaceError(
            f"{what} must be a tuple of strings, got {type(namespace).__name__} {namespace!r}"
        )
    return namespace


def validate_labels(op: Op) -> None:
    """LangGraph's label rules (strings, not empty, no '.', no NUL), for ops given to ``batch`` directly."""
    try:
        validate_op_namespace(op)
    except InvalidNamespaceError as exc:
        raise NamespaceError(str(exc)) from exc


def check_item_key(key: object) -> str:
    """Return an item key when it is a string; InvalidInputError otherwise."""
    if not isinstance(key, str):
        raise InvalidInputError(
            f"an item key must be a string, got {type(key).__name__}", argument="key"
        )
    return key


def check_count(value: object, name: str) -> int:
    """Return a limit or offset when it is an integer >= 0; InvalidInputError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an integer >= 0, got {value!r}", argument=name)
    return value


def check_ttl_minutes(
    ttl: object, error: type[InvalidInputError] | type[ConfigurationError]
) -> float:
    """Return a TTL in minutes when it is a positive number flowmem can store; ``error`` otherwise."""
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        raise error(f"a TTL is a positive number of minutes, got {ttl!r}", argument="ttl")
    check_ttl(float(ttl) * 60)
    return float(ttl)


def check_filter(condition: object) -> None:
    """Refuse a search filter that is not a dict or names an operator flowmem does not match."""
    if condition is None:
        return
    if not isinstance(condition, dict):
        raise InvalidInputError(
            f"a search filter is a dict, got {type(condition).__name__}", argument="filter"
        )
    pending: list[object] = list(condition.values())
    while pending:
        wanted = pending.pop()
        if isinstance(wanted, dict):
            operators = [name for name in wanted if isinstance(name, str) and name.startswith("$")]
            unknown = [name for name in operators if name not in FILTER_OPERATORS]
            if unknown:
                raise InvalidInputError(
                    f"unsupported filter operator {unknown[0]!r}: use one of "
                    f"{', '.join(sorted(FILTER_OPERATORS))}",
                    argument="filter",
                )
            if not operators:
                pending.extend(wanted.values())
        elif isinstance(wanted, (list, tuple)):
            pending.extend(wanted)


# --- the filter and match semantics of InMemoryStore ---------------------------------------
def matches(value: dict[str, Any], condition: dict[str, Any]) -> bool:
    """``InMemoryStore``'s filter match: every field of ``condition`` compares equal in ``value``."""
    return all(_compare(value.get(name), wanted) for name, wanted in condition.items())


def _compare(value: Any, wanted: Any) -> bool:
    """``InMemoryStore``'s comparison: nested dicts, lists element-wise, ``$`` operators, else ``==``."""
    if isinstance(wanted, dict):
        if any(isinstance(name, str) and name.startswith("$") for name in wanted):
            return all(_apply(value, operator, operand) for operator, operand in wanted.items())
        if not isinstance(value, dict):
            return False
        return all(_compare(value.get(name), inner) for name, inner in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(got, inner) for got, inner in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _apply(value: Any, operator: str, operand: Any) -> bool:
    """One ``$`` operator; an order comparison of what is not a number matches nothing."""
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    try:
        got, limit = float(value), float(operand)
    except (TypeError, ValueError):  # InMemoryStore raises (float(None)): here it does not match
        return False
    if operator == "$gt":
        return got > limit
    if operator == "$gte":
        return got >= limit
    if operator == "$lt":
        return got < limit
    if operator == "$lte":
        return got <= limit
    raise InvalidInputError(f"unsupported filter operator {operator!r}", argument="filter")


def does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """``InMemoryStore``'s namespace match: a prefix or suffix path where ``"*"`` matches any label."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(wanted == "*" or got == wanted for got, wanted in pairs)


__all__ = [
    "FILTER_OPERATORS",
    "check_count",
    "check_filter",
    "check_item_key",
    "check_namespace",
    "check_ttl_minutes",
    "does_match",
    "matches",
    "validate_labels",
]
