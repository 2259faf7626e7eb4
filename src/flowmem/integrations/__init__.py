"""Adapters that put flowmem under other frameworks' memory interfaces.

Each adapter lives in its own module and needs its extra:
``flowmem.integrations.langchain`` (the ``langchain`` extra) and
``flowmem.integrations.openai_agents`` (the ``openai-agents`` extra).
This package imports neither, so importing it never needs an extra.

Both adapters take any ``flowmem.memory.Memory``: a ``MemoryService`` in process or
a ``flowmem.client.Client`` over HTTP. They never import ``flowmem.client``.
"""

from __future__ import annotations

import importlib
import inspect

from flowmem.memory import Memory


def require(module: str, extra: str) -> None:
    """Import ``module`` or raise an ``ImportError`` that names the extra to install."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this flowmem adapter needs {module!r}: install flowmem's {extra!r} extra, "
            f"pip install '<checkout>[{extra}]' (docs/guide.md, Install)"
        ) from exc


def memory_of(memory: Memory, adapter: str) -> Memory:
    """Return ``memory`` when its operations are synchronous; raise TypeError otherwise.

    An ``AsyncClient`` has the protocol's methods, awaited: given to an adapter, its
    calls would return coroutines that are never run. Say so at construction.
    """
    if any(inspect.iscoroutinefunction(getattr(memory, op, None)) for op in ("load", "append")):
        raise TypeError(
            f"{adapter} needs a synchronous flowmem.memory.Memory (a MemoryService or a "
            f"flowmem.client.Client), not {type(memory).__name__}, whose calls are awaited"
        )
    return memory
