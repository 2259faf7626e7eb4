"""``Client`` and ``AsyncClient`` are twins: method by method the same, but for ``await`` (issue 25).

Their methods are declared once (``client/methods.py``, ``client/memory_methods.py``)
and the rest of the sync client is generated from the async one (scripts/async_to_sync.py,
checked by tests/client/test_sync.py); this test still compares them as classes: the
same public methods with the same signatures, and, once ``async``/``await`` and the
iterator types are folded, the same body, but for the few methods whose I/O differs
by nature (listed in ``DIFFERENT`` with the reason).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import pytest

from flowmem.client.aio import AsyncClient
from flowmem.client.sync import Client

# methods whose bodies differ by the nature of sync and async I/O, and why
DIFFERENT = {
    "close": "closes its own kind of httpx client",
    "iter_sessions": "a generator or an async generator",
    "iter_messages": "a generator or an async generator",
}
_ASYNC_SPELLINGS = {"__aenter__": "__enter__", "__aexit__": "__exit__"}
_ASYNC_NAMES = {
    "AsyncBaseTransport": "BaseTransport",
    "AsyncIterator": "Iterator",
    "AsyncClient": "Client",
    "AsyncMemory": "Memory",
}


def _members(cls: type) -> dict[str, object]:
    """The class's own members and those of its flowmem bases (the declared methods), as read on it."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("flowmem.client."):
            found.update({name: getattr(cls, name) for name in vars(klass)})
    return found


def _methods(cls: type) -> dict[str, object]:
    found = {}
    for name, member in _members(cls).items():
        if callable(member) and (not name.startswith("_") or name in ("__init__", "_plan")):
            found[name] = member
        elif name in ("__enter__", "__exit__", "__aenter__", "__aexit__"):
            found[_ASYNC_SPELLINGS.get(name, name)] = member
    return found


def _folded_signature(function: object) -> str:
    text = str(inspect.signature(function))  # type: ignore[arg-type]
    for name in _ASYNC_NAMES:
        text = text.replace(name, _ASYNC_NAMES[name])
    return re.sub(r"\bAwaitable\[(.*)\]", r"\1", text)


class _Fold(ast.NodeTransformer):
    """Async spelled as sync: ``await x`` is ``x``, ``async def/for/with`` plain."""

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        return ast.FunctionDef(**{f: getattr(node, f) for f in node._fields})

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        self.generic_visit(node)
        return ast.For(**{f: getattr(node, f) for f in node._fields})

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        self.generic_visit(node)
        return ast.With(**{f: getattr(node, f) for f in node._fields})

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id=_ASYNC_NAMES.get(node.id, node.id), ctx=node.ctx)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        return ast.Attribute(
            value=node.value, attr=_ASYNC_NAMES.get(node.attr, node.attr), ctx=node.ctx
        )


def _folded_body(function: object) -> str:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    node = tree.body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    node.body = [
        s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    node.name, node.returns = "f", None
    return ast.dump(_Fold().visit(node), annotate_fields=False)


def test_the_twins_have_the_same_methods() -> None:
    assert sorted(_methods(Client)) == sorted(_methods(AsyncClient))


@pytest.mark.parametrize("name", sorted(_methods(Client)))
def test_each_method_has_the_same_signature(name: str) -> None:
    sync, aio = _methods(Client)[name], _methods(AsyncClient)[name]
    assert _folded_signature(sync) == _folded_signature(aio)


@pytest.mark.parametrize("name", sorted(set(_methods(Client)) - set(DIFFERENT)))
def test_each_method_does_the_same_but_for_await(name: str) -> None:
    sync, aio = _methods(Client)[name], _methods(AsyncClient)[name]
    assert _folded_body(sync) == _folded_body(aio), f"Client.{name} and AsyncClient.{name} differ"


@pytest.mark.parametrize("name", sorted(DIFFERENT))
def test_the_methods_listed_as_different_really_differ(name: str) -> None:
    sync, aio = _methods(Client)[name], _methods(AsyncClient)[name]
    assert _folded_body(sync) != _folded_body(aio), (
        f"{name} is the same in both: drop it from DIFFERENT"
    )
