"""The base of every FlowDrop memory node: ports, config, input checking, error wrapping.

A node is built once per workflow node (``create_node(type_id, service, config)``)
and run many times (``process(inputs, context)``). Inputs come from the host engine
as a mapping of port name to value; an unwired port is absent or ``None`` and takes
its default (the port's own, or the one the node's config sets). Input that a node
cannot process raises ``flowmem.errors.NodeError`` naming the node and the port.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from flowmem.core import ROLES
from flowmem.errors import ConfigurationError, FlowmemError, InvalidInputError, NodeError
from flowmem.results import fields_of
from flowmem.scope import SCOPES, ExecutionContext
from flowmem.service import MAX_KEY_LENGTH, MemoryService


@dataclass(frozen=True)
class Port:
    """One port: its name, value type, whether it is required, and its default.

    Input types: ``scope`` (one of the six scope names), ``key`` (1–255 characters),
    ``string``, ``role`` (``system``/``user``/``assistant``/``tool``), ``count`` (an integer >= 0), ``ttl`` (a positive number of seconds
    or null), ``messages`` (a list of messages), ``message`` (one message object or
    a list of them) and ``any``. ``nullable`` lets a required port carry ``null``.
    """

    name: str
    type: str
    required: bool = False
    default: Any = None
    description: str = ""
    nullable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the port as a plain dict (for a host engine's node catalogue)."""
        return {name: value for name, value in fields_of(self).items() if name != "nullable"}


class Node:
    """A FlowDrop memory node processor; subclasses declare ports and implement ``run``.

    ``config`` may set the default of any input port by name (for example
    ``{"scope": "user"}``); a config value is checked like an input and an unknown
    config key or a bad value is a ``ConfigurationError``.
    """

    type_id: ClassVar[str] = ""
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    inputs: ClassVar[tuple[Port, ...]] = ()
    outputs: ClassVar[tuple[Port, ...]] = ()
    uses_memory: ClassVar[bool] = True
    extra_config: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self, service: MemoryService | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        if self.uses_memory and not isinstance(service, MemoryService):
            raise ConfigurationError(f"node {self.type_id} needs a MemoryService")
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise ConfigurationError(f"node {self.type_id}: config must be an object")
        self.service = service
        self.config: dict[str, Any] = dict(config)
        self.configure()
        ports = self.input_ports()
        names = {port.name for port in ports}
        unknown = sorted(str(k) for k in config if k not in names and k not in self.extra_config)
        if unknown:
            raise ConfigurationError(
                f"node {self.type_id}: unknown config key(s) {', '.join(unknown)}"
            )
        self.ports: dict[str, Port] = {port.name: port for port in ports}
        self.defaults: dict[str, Any] = {
            port.name: self.config.get(port.name, port.default) for port in ports
        }
        probe = Inputs(self, {})
        for name in self.config:
            if name in self.ports:
                try:
                    probe.value(name, check_required=False)
                except NodeError as exc:
                    raise ConfigurationError(
                        f"node {self.type_id}: bad config {name!r}: {exc.message}"
                    ) from exc

    # --- hooks for subclasses ----------------------------------------------------
    def configure(self) -> None:
        """Check node-specific config (subclasses override; raise ``ConfigurationError``)."""

    def input_ports(self) -> tuple[Port, ...]:
        """Return this node's input ports (fixed per type unless a subclass declares them)."""
        return self.inputs

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Compute the outputs (subclasses implement it)."""
        raise NotImplementedError

    @property
    def memory(self) -> MemoryService:
        """Return the memory service (every memory node goes through it)."""
        if self.service is None:
            raise ConfigurationError(f"node {self.type_id} needs a MemoryService")
        return self.service

    # --- the public entry point ----------------------------------------------------
    def process(
        self,
        inputs: Mapping[str, Any],
        context: ExecutionContext | Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run the node on ``inputs`` (port name → value) under ``context``; return outputs.

        ``context`` is an ``ExecutionContext``, a plain mapping of its fields, or None.
        Invalid input raises ``NodeError`` naming the node and the port.
        """
        if not isinstance(inputs, Mapping):
            raise NodeError(self.type_id, None, "inputs must be an object of port values")
        if context is not None and not isinstance(context, ExecutionContext):
            if not isinstance(context, Mapping):
                raise NodeError(self.type_id, None, "context must be an ExecutionContext")
            try:
                context = ExecutionContext.from_mapping(context)
            except FlowmemError as exc:
                raise NodeError(
                    self.type_id, None, f"bad execution context: {exc.message}"
                ) from exc
        return self.run(Inputs(self, inputs), context)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Return this node type's catalogue entry: id, label, description, ports."""
        return {
            "type_id": cls.type_id,
            "label": cls.label,
            "description": cls.description,
            "inputs": [port.to_dict() for port in cls.inputs],
            "outputs": [port.to_dict() for port in cls.outputs],
        }

    def error(self, port: str | None, message: str) -> NodeError:
        """Return a ``NodeError`` naming this node type and ``port``."""
        return NodeError(self.type_id, port, message)


def _check_string(node: Node, port: str, value: Any) -> str:
    if not isinstance(value, str):
        raise node.error(port, f"expected a string, got {type(value).__name__}")
    return str(value)


def _check_scope(node: Node, port: str, value: Any) -> str:
    name = _check_string(node, port, value)
    if name not in SCOPES:
        raise node.error(
            port, f"unknown memory scope {name!r}: expected one of {', '.join(SCOPES)}"
        )
    return name


def _check_role(node: Node, port: str, value: Any) -> str:
    role = _check_string(node, port, value)
    if role not in ROLES:
        raise node.error(port, f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    return role


def _check_key(node: Node, port: str, value: Any) -> str:
    key = _check_string(node, port, value)
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise node.error(port, f"must be 1 to {MAX_KEY_LENGTH} characters long")
    return key


def _check_count(node: Node, port: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise node.error(port, f"expected an integer >= 0, got {value!r}")
    return int(value)


def _check_ttl(node: Node, port: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise node.error(port, f"expected a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise node.error(port, f"expected a positive number of seconds, got {value!r}")
    return float(value)


def _check_messages(node: Node, port: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise node.error(port, f"expected a list of messages, got {type(value).__name__}")
    return list(value)


def _check_message(node: Node, port: str, value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise node.error(
        port, f"expected a message object or a list of messages, got {type(value).__name__}"
    )


def _check_any(node: Node, port: str, value: Any) -> Any:
    return value


CHECKS: dict[str, Callable[[Node, str, Any], Any]] = {
    "string": _check_string,
    "scope": _check_scope,
    "key": _check_key,
    "role": _check_role,
    "count": _check_count,
    "ttl": _check_ttl,
    "messages": _check_messages,
    "message": _check_message,
    "any": _check_any,
}


class Inputs:
    """One call's port values, read and checked by each port's declared type."""

    def __init__(self, node: Node, values: Mapping[str, Any]) -> None:
        self.node = node
        self.values = values

    def value(self, name: str, *, check_required: bool = True) -> Any:
        """Return the checked value of port ``name`` (or its default; ``None`` when unset).

        An absent port, or one carrying ``None`` unless the port is nullable, takes
        the default. A required port with neither raises ``NodeError``.
        """
        port = self.node.ports[name]
        if name in self.values and (self.values[name] is not None or port.nullable):
            value = self.values[name]
            if value is None:
                return None
        else:
            value = self.node.defaults.get(name)
            if value is None:
                if port.required and check_required:
                    raise self.node.error(name, "missing required input")
                return None
        return CHECKS[port.type](self.node, name, value)


@contextmanager
def service_errors(
    node: Node, ports: Mapping[str, str] | None = None, fallback: str | None = None
) -> Iterator[None]:
    """Turn a service's ``InvalidInputError`` into a ``NodeError`` naming the port.

    ``ports`` maps the service's argument names (``key``, ``ttl``, ``value``, …) to
    this node's port names (an unmapped argument keeps its own name); an error that
    names no argument (an invalid message) is put on the ``fallback`` port.
    """
    try:
        yield
    except NodeError:
        raise
    except InvalidInputError as exc:
        argument = exc.details.get("argument")
        port = fallback if argument is None else (ports or {}).get(str(argument), str(argument))
        raise node.error(port, exc.message) from exc
