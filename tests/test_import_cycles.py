"""``src`` has no import cycle, at module level or between packages (issue 39's done-when).

grimp builds the graph import-linter reads (type-checking imports included); a cycle
is a strongly connected component of more than one node. The helper is checked on a
graph with a cycle so the test cannot pass by finding nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grimp


def strongly_connected(nodes: Iterable[str], edges: Callable[[str], Iterable[str]]) -> list[list[str]]:
    """The components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(edges(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges(nxt))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


GRAPH = grimp.build_graph("flowmem")


def _package(graph: grimp.ImportGraph, module: str) -> str:
    return module if graph.find_children(module) else module.rsplit(".", 1)[0]


def test_the_cycle_finder_finds_a_cycle_and_no_false_one() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert strongly_connected(edges, lambda n: edges[n]) == [["a", "b", "c"]]
    assert strongly_connected(["x", "y"], lambda n: ["y"] if n == "x" else []) == []


def test_no_module_imports_itself_back_through_others() -> None:
    cycles = strongly_connected(sorted(GRAPH.modules), GRAPH.find_modules_directly_imported_by)
    assert cycles == [], f"import cycles between modules: {cycles}"


def test_no_package_imports_itself_back_through_others() -> None:
    """Packages as the containing package of each module; a package and its own parent do not count."""
    outgoing: dict[str, set[str]] = {}
    for module in GRAPH.modules:
        mine = _package(GRAPH, module)
        for target in GRAPH.find_modules_directly_imported_by(module):
            theirs = _package(GRAPH, target)
            nested = theirs.startswith(mine + ".") or mine.startswith(theirs + ".")
            if theirs != mine and not nested:
                outgoing.setdefault(mine, set()).add(theirs)
    cycles = strongly_connected(sorted(outgoing), lambda p: sorted(outgoing.get(p, ())))
    assert cycles == [], f"import cycles between packages: {cycles}"
