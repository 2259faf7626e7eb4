"""Memory record nodes: ``memory_read``, ``memory_write``, ``memory_delete`` and ``*_raw``.

Each goes through ``MemoryService``: the scope is resolved there (the one place
refusal is decided, MEM-6/MEM-13) and a refusal returns the neutral outputs with the
one WARNING the service logs (MEM-7); the node adds no log of its own. The ``_raw``
variants take an explicit ``scope_id`` and skip resolution (trusted callers only).
"""

from __future__ import annotations

from typing import Any, ClassVar

from flowmem.nodes.base import Inputs, Node, Port, service_errors
from flowmem.scope import ExecutionContext
from flowmem.service import ReadResult, WriteResult

KEY = Port("key", "key", required=True, description="the record's key (1–255 characters)")
SCOPE = Port("scope", "scope", default="global", description="one of the six memory scopes")
SCOPE_ID = Port(
    "scope_id", "string", required=True, description="the explicit scope id (skips resolution)"
)
TTL = Port("ttl", "ttl", description="seconds until the record expires; null keeps it")
VALUE = Port("value", "any", required=True, nullable=True, description="any JSON value")
DEFAULT_VALUE = Port("default_value", "any", description="returned when nothing is found")

READ_OUT = (
    Port("value", "any", description="the stored value, or default_value"),
    Port("found", "boolean", description="whether a live record was found"),
    Port("key", "string"),
    Port("scope", "string"),
    Port("resolved_scope_id", "string", description='"" on a refusal'),
)
WRITE_OUT = (
    Port("success", "boolean", description="false on a refusal"),
    Port("key", "string"),
    Port("scope", "string"),
    Port("resolved_scope_id", "string", description='"" on a refusal'),
)


def read_outputs(result: ReadResult, key: Any, scope: Any) -> dict[str, Any]:
    """The output ports of a read node."""
    return {
        "value": result.value,
        "found": result.found,
        "key": key,
        "scope": scope,
        "resolved_scope_id": result.resolved_scope_id,
    }


def write_outputs(result: WriteResult, key: Any, scope: Any) -> dict[str, Any]:
    """The output ports of a write or delete node."""
    return {
        "success": result.success,
        "key": key,
        "scope": scope,
        "resolved_scope_id": result.resolved_scope_id,
    }


class MemoryRead(Node):
    """``memory_read``: read a memory record under a resolved scope.

    Inputs: ``key`` (required), ``default_value`` (default null), ``scope`` (default
    ``global``). Outputs: ``value``, ``found``, ``key``, ``scope``,
    ``resolved_scope_id``. A refused identity scope gives ``default_value``, not
    found and ``resolved_scope_id`` ``""`` (MEM-7).
    """

    type_id: ClassVar[str] = "memory_read"
    label: ClassVar[str] = "Memory read"
    description: ClassVar[str] = "Read a value from scoped memory."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, DEFAULT_VALUE, SCOPE)
    outputs: ClassVar[tuple[Port, ...]] = READ_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Read through ``MemoryService.read``."""
        key, scope = inputs.value("key"), inputs.value("scope")
        default = inputs.value("default_value")
        with service_errors(self):
            result = self.memory.read(scope, key, context, default=default)
        return read_outputs(result, key, scope)


class MemoryWrite(Node):
    """``memory_write``: write a JSON value under a resolved scope, with an optional TTL.

    Inputs: ``key`` (required), ``value`` (required; null is a value), ``scope``
    (default ``global``), ``ttl`` (seconds, default none). Outputs: ``success``,
    ``key``, ``scope``, ``resolved_scope_id``. A refusal writes nothing and reports
    ``success`` false (MEM-7).
    """

    type_id: ClassVar[str] = "memory_write"
    label: ClassVar[str] = "Memory write"
    description: ClassVar[str] = "Write a value to scoped memory."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, VALUE, SCOPE, TTL)
    outputs: ClassVar[tuple[Port, ...]] = WRITE_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Write through ``MemoryService.write``."""
        key, scope = inputs.value("key"), inputs.value("scope")
        value, ttl = inputs.value("value"), inputs.value("ttl")
        with service_errors(self):
            result = self.memory.write(scope, key, value, context, ttl=ttl)
        return write_outputs(result, key, scope)


class MemoryDelete(Node):
    """``memory_delete``: delete a memory record under a resolved scope.

    Inputs: ``key`` (required), ``scope`` (default ``global``). Outputs: ``success``
    (true once the key is absent), ``key``, ``scope``, ``resolved_scope_id``. A
    refusal deletes nothing and reports ``success`` false (MEM-7).
    """

    type_id: ClassVar[str] = "memory_delete"
    label: ClassVar[str] = "Memory delete"
    description: ClassVar[str] = "Delete a value from scoped memory."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, SCOPE)
    outputs: ClassVar[tuple[Port, ...]] = WRITE_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Delete through ``MemoryService.delete``."""
        key, scope = inputs.value("key"), inputs.value("scope")
        with service_errors(self):
            result = self.memory.delete(scope, key, context)
        return write_outputs(result, key, scope)


class MemoryReadRaw(Node):
    """``memory_read_raw``: read at an explicit ``scope_id`` (no resolution, never refuses).

    Inputs: ``key`` (required), ``scope_id`` (required string), ``default_value``,
    ``scope`` (default ``global``). Outputs as ``memory_read``.
    """

    type_id: ClassVar[str] = "memory_read_raw"
    label: ClassVar[str] = "Memory read (explicit scope id)"
    description: ClassVar[str] = "Read a value at an explicit scope id."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, SCOPE_ID, DEFAULT_VALUE, SCOPE)
    outputs: ClassVar[tuple[Port, ...]] = READ_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Read through ``MemoryService.read_raw``."""
        key, scope = inputs.value("key"), inputs.value("scope")
        scope_id, default = inputs.value("scope_id"), inputs.value("default_value")
        with service_errors(self):
            result = self.memory.read_raw(scope, scope_id, key, default=default)
        return read_outputs(result, key, scope)


class MemoryWriteRaw(Node):
    """``memory_write_raw``: write at an explicit ``scope_id`` (no resolution).

    Inputs: ``key``, ``value``, ``scope_id`` (required), ``scope`` (default
    ``global``), ``ttl``. Outputs as ``memory_write``.
    """

    type_id: ClassVar[str] = "memory_write_raw"
    label: ClassVar[str] = "Memory write (explicit scope id)"
    description: ClassVar[str] = "Write a value at an explicit scope id."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, VALUE, SCOPE_ID, SCOPE, TTL)
    outputs: ClassVar[tuple[Port, ...]] = WRITE_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Write through ``MemoryService.write_raw``."""
        key, scope = inputs.value("key"), inputs.value("scope")
        scope_id, value, ttl = inputs.value("scope_id"), inputs.value("value"), inputs.value("ttl")
        with service_errors(self):
            result = self.memory.write_raw(scope, scope_id, key, value, ttl=ttl)
        return write_outputs(result, key, scope)


class MemoryDeleteRaw(Node):
    """``memory_delete_raw``: delete at an explicit ``scope_id`` (no resolution).

    Inputs: ``key``, ``scope_id`` (required), ``scope`` (default ``global``).
    Outputs as ``memory_delete``.
    """

    type_id: ClassVar[str] = "memory_delete_raw"
    label: ClassVar[str] = "Memory delete (explicit scope id)"
    description: ClassVar[str] = "Delete a value at an explicit scope id."
    inputs: ClassVar[tuple[Port, ...]] = (KEY, SCOPE_ID, SCOPE)
    outputs: ClassVar[tuple[Port, ...]] = WRITE_OUT

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Delete through ``MemoryService.delete_raw``."""
        key, scope, scope_id = inputs.value("key"), inputs.value("scope"), inputs.value("scope_id")
        with service_errors(self):
            result = self.memory.delete_raw(scope, scope_id, key)
        return write_outputs(result, key, scope)
