"""The adapters reach storage only through the memory service, never ``memory.store`` (decision 0115).

An AST walk of ``src/flowmem/integrations``: every attribute named ``store`` (and every
``getattr(..., "store")``) is a reach-through to the service's store unless it is one of
the few listed below, each an adapter's own object that happens to have that name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import flowmem.integrations

ROOT = Path(flowmem.integrations.__file__).parent

ALLOWED = {
    # (module under integrations, the expression): why it is not the service's store
    ("pydantic_ai/ahead.py", "self.store"): "the write-ahead's FlowmemConversationStore",
    ("openai_agents/session.py", "self.write_ahead.store"): "WriteAhead.store, a method",
}


def _is_store_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "store"


def _is_store_getattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "setattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "store"
    )


def reach_throughs(source: str, module: str) -> list[tuple[str, int, str]]:
    """Each ``.store`` attribute or ``getattr(x, "store")`` in ``source`` not in ``ALLOWED``."""
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if (_is_store_attribute(node) or _is_store_getattr(node)) and (
            module,
            ast.unparse(node),
        ) not in ALLOWED:
            found.append((module, getattr(node, "lineno", 0), ast.unparse(node)))
    return found


def adapter_modules() -> list[tuple[str, str]]:
    """(path under integrations, source) of every adapter module."""
    return [
        (path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(ROOT.rglob("*.py"))
    ]


def test_no_adapter_reaches_the_services_store() -> None:
    found = [hit for module, source in adapter_modules() for hit in reach_throughs(source, module)]
    assert found == [], "use flowmem.service.kinds / session_access, not memory.store"


def test_every_allowed_store_attribute_is_still_there() -> None:
    seen = {
        (module, ast.unparse(node))
        for module, source in adapter_modules()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "store"
    }
    assert set(ALLOWED) <= seen  # an exception whose code went is dropped from the list


def test_the_guard_finds_a_deliberately_added_reach_through() -> None:
    for reach in (
        "self.memory.store.delete_session(thread)",
        "tables = checkpoints_of(memory.store)",
        "store = getattr(self.memory, 'store')",
        "service = self.memory\nservice.store.close()",
    ):
        assert reach_throughs(reach, "langgraph/saver.py"), reach
    source = dict(adapter_modules())["langgraph/saver.py"]
    added = source + "\n\ndef sneak(memory):\n    return memory.store\n"
    assert reach_throughs(added, "langgraph/saver.py") == [
        ("langgraph/saver.py", added.count("\n"), "memory.store")
    ]
