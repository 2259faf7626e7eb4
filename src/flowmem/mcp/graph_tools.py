"""The reference memory server's nine tools, by its names and argument and result shapes.

``create_entities``, ``create_relations``, ``add_observations``, ``delete_entities``,
``delete_observations``, ``delete_relations``, ``read_graph``, ``search_nodes`` and
``open_nodes`` take the arguments ``@modelcontextprotocol/server-memory`` takes and
answer as it answers (its text: the JSON it writes; its structured content: the
object its output schema names), so a client configured for it works unchanged.
The graph is the caller's own (``flowmem.mcp.graph``). Each tool is a row of
``TOOLS``: one argument (or none), one operation on the graph, one of three answers
(what was added, a success message, the graph found); ``register`` makes of each row
the function the SDK reads (signed ``(argument, ctx)``, named and documented as the row).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from flowmem.mcp.answers import ok, tool_errors
from flowmem.mcp.caller import Caller
from flowmem.mcp.graph import GraphStore

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Entity(BaseModel):
    """An entity of the graph."""

    name: str = Field(description="The name of the entity")
    entityType: str = Field(description="The type of the entity")
    observations: list[str] = Field(
        description="An array of observation contents associated with the entity"
    )


class Relation(BaseModel):
    """A directed relation between two entities."""

    from_: str = Field(alias="from", description="The name of the entity where the relation starts")
    to: str = Field(description="The name of the entity where the relation ends")
    relationType: str = Field(description="The type of the relation")


class Addition(BaseModel):
    """Observations to add to one entity."""

    entityName: str = Field(description="The name of the entity to add the observations to")
    contents: list[str] = Field(description="An array of observation contents to add")


class Deletion(BaseModel):
    """Observations to delete from one entity."""

    entityName: str = Field(description="The name of the entity containing the observations")
    observations: list[str] = Field(description="An array of observations to delete")


EntityNames = Annotated[list[str], Field(description="An array of entity names to delete")]
NodeNames = Annotated[list[str], Field(description="An array of entity names to retrieve")]
Relations = Annotated[list[Relation], Field(description="An array of relations to delete")]
Query = Annotated[str, Field(description="The search query to match against entity names, types, and observation content")]

Answer = Callable[[Any], CallToolResult]


def _listed(key: str) -> Answer:
    """The answer of a tool that adds: ``{key: what was added}``, the added items as the text."""
    return lambda added: ok({key: added}, added)


def _done(message: str) -> Answer:
    """The answer of a tool that deletes: success and ``message``."""
    return lambda _: ok({"success": True, "message": message}, message)


@dataclass(frozen=True)
class GraphTool:
    """One tool: its name and description, its hints, its one argument (or none), its work and its answer.

    Its title is its name's words capitalized (``Create Entities``). ``work`` gets the
    caller's graph and the argument as plain JSON (a model as the object a client
    sends: ``from``, not ``from_``) and runs in the caller's thread; ``answer`` makes
    the tool's result of what it returned.
    """

    name: str
    description: str
    annotations: ToolAnnotations
    argument: tuple[str, Any] | None
    work: Callable[[GraphStore, Any], Any]
    answer: Answer

    @property
    def title(self) -> str:
        """``create_entities`` -> ``Create Entities``."""
        return self.name.replace("_", " ").title()


TOOLS = (
    GraphTool("create_entities", "Create multiple new entities in the knowledge graph",
              ADD, ("entities", list[Entity]), GraphStore.create_entities, _listed("entities")),
    GraphTool("create_relations", "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
              ADD, ("relations", list[Relation]), GraphStore.create_relations, _listed("relations")),
    GraphTool("add_observations", "Add new observations to existing entities in the knowledge graph",
              ADD, ("observations", list[Addition]), GraphStore.add_observations, _listed("results")),
    GraphTool("delete_entities", "Delete multiple entities and their associated relations from the knowledge graph",
              DELETE, ("entityNames", EntityNames), GraphStore.delete_entities, _done("Entities deleted successfully")),
    GraphTool("delete_observations", "Delete specific observations from entities in the knowledge graph",
              DELETE, ("deletions", list[Deletion]), GraphStore.delete_observations, _done("Observations deleted successfully")),
    GraphTool("delete_relations", "Delete multiple relations from the knowledge graph",
              DELETE, ("relations", Relations), GraphStore.delete_relations, _done("Relations deleted successfully")),
    GraphTool("read_graph", "Read the entire knowledge graph",
              READ, None, lambda graph, _: graph.read().to_dict(), ok),
    GraphTool("search_nodes", "Search for nodes in the knowledge graph based on a query",
              READ, ("query", Query), lambda graph, query: graph.search(query).to_dict(), ok),
    GraphTool("open_nodes", "Open specific nodes in the knowledge graph by their names",
              READ, ("names", NodeNames), lambda graph, names: graph.open(names).to_dict(), ok),
)
"""The nine tools, in the reference server's order."""


def _plain(value: Any) -> Any:
    """An argument as JSON: each model of a list as the object a client sends (by alias)."""
    if isinstance(value, list):
        return [item.model_dump(by_alias=True) if isinstance(item, BaseModel) else item for item in value]
    return value


def _function(tool: GraphTool, on_graph: Callable[[Context, Callable[[GraphStore], Any]], Awaitable[Any]]) -> Any:
    """The tool's function as the SDK reads it: ``(argument, ctx)`` signed, named and documented as ``tool`` says."""

    async def run(ctx: Context, **given: Any) -> CallToolResult:
        argument = _plain(given[tool.argument[0]]) if tool.argument else None
        return tool.answer(await on_graph(ctx, lambda graph: tool.work(graph, argument)))

    declared = [tool.argument] if tool.argument else []
    declared.append(("ctx", Context))
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind) for name, kind in declared]
    run.__signature__ = inspect.Signature(parameters, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    run.__annotations__ = {**dict(declared), "return": CallToolResult}
    run.__name__ = run.__qualname__ = tool.name
    run.__doc__ = tool.description
    return run


def register(server: MCPServer, caller_of: Callable[[Any], Caller]) -> None:
    """Add the nine knowledge-graph tools to ``server``."""

    async def on_graph(ctx: Context, work: Callable[[GraphStore], Any]) -> Any:
        caller = caller_of(ctx)
        return await caller.call(lambda: work(GraphStore(caller)))

    for tool in TOOLS:
        add = server.tool(name=tool.name, title=tool.title, annotations=tool.annotations)
        add(tool_errors(_function(tool, on_graph)))
