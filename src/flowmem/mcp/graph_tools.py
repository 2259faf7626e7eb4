"""The reference memory server's nine tools, by its names and argument and result shapes.

``create_entities``, ``create_relations``, ``add_observations``, ``delete_entities``,
``delete_observations``, ``delete_relations``, ``read_graph``, ``search_nodes`` and
``open_nodes`` take the arguments ``@modelcontextprotocol/server-memory`` takes and
answer as it answers (its text: the JSON it writes; its structured content: the
object its output schema names), so a client configured for it works unchanged.
The graph is the caller's own (``flowmem.mcp.graph``).
"""

from __future__ import annotations

from collections.abc import Callable
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

    def plain(self) -> dict[str, str]:
        """``{from, to, relationType}``."""
        return {"from": self.from_, "to": self.to, "relationType": self.relationType}


class Addition(BaseModel):
    """Observations to add to one entity."""

    entityName: str = Field(description="The name of the entity to add the observations to")
    contents: list[str] = Field(description="An array of observation contents to add")


class Deletion(BaseModel):
    """Observations to delete from one entity."""

    entityName: str = Field(description="The name of the entity containing the observations")
    observations: list[str] = Field(description="An array of observations to delete")


def _done(message: str) -> CallToolResult:
    return ok({"success": True, "message": message}, message)


def register(server: MCPServer, caller_of: Callable[[Any], Caller]) -> None:
    """Add the nine knowledge-graph tools to ``server``."""

    async def on_graph(ctx: Context, work: Callable[[GraphStore], Any]) -> Any:
        caller = caller_of(ctx)
        return await caller.call(lambda: work(GraphStore(caller)))

    @server.tool(name="create_entities", title="Create Entities", annotations=ADD)
    @tool_errors
    async def create_entities(entities: list[Entity], ctx: Context) -> CallToolResult:
        """Create multiple new entities in the knowledge graph"""
        plain = [e.model_dump() for e in entities]
        created = await on_graph(ctx, lambda g: g.create_entities(plain))
        return ok({"entities": created}, created)

    @server.tool(name="create_relations", title="Create Relations", annotations=ADD)
    @tool_errors
    async def create_relations(relations: list[Relation], ctx: Context) -> CallToolResult:
        """Create multiple new relations between entities in the knowledge graph. Relations should be in active voice"""
        plain = [r.plain() for r in relations]
        created = await on_graph(ctx, lambda g: g.create_relations(plain))
        return ok({"relations": created}, created)

    @server.tool(name="add_observations", title="Add Observations", annotations=ADD)
    @tool_errors
    async def add_observations(observations: list[Addition], ctx: Context) -> CallToolResult:
        """Add new observations to existing entities in the knowledge graph"""
        plain = [o.model_dump() for o in observations]
        results = await on_graph(ctx, lambda g: g.add_observations(plain))
        return ok({"results": results}, results)

    @server.tool(name="delete_entities", title="Delete Entities", annotations=DELETE)
    @tool_errors
    async def delete_entities(
        entityNames: Annotated[list[str], Field(description="An array of entity names to delete")],
        ctx: Context,
    ) -> CallToolResult:
        """Delete multiple entities and their associated relations from the knowledge graph"""
        await on_graph(ctx, lambda g: g.delete_entities(entityNames))
        return _done("Entities deleted successfully")

    @server.tool(name="delete_observations", title="Delete Observations", annotations=DELETE)
    @tool_errors
    async def delete_observations(deletions: list[Deletion], ctx: Context) -> CallToolResult:
        """Delete specific observations from entities in the knowledge graph"""
        plain = [d.model_dump() for d in deletions]
        await on_graph(ctx, lambda g: g.delete_observations(plain))
        return _done("Observations deleted successfully")

    @server.tool(name="delete_relations", title="Delete Relations", annotations=DELETE)
    @tool_errors
    async def delete_relations(
        relations: Annotated[list[Relation], Field(description="An array of relations to delete")],
        ctx: Context,
    ) -> CallToolResult:
        """Delete multiple relations from the knowledge graph"""
        plain = [r.plain() for r in relations]
        await on_graph(ctx, lambda g: g.delete_relations(plain))
        return _done("Relations deleted successfully")

    @server.tool(name="read_graph", title="Read Graph", annotations=READ)
    @tool_errors
    async def read_graph(ctx: Context) -> CallToolResult:
        """Read the entire knowledge graph"""
        graph = await on_graph(ctx, lambda g: g.read().to_dict())
        return ok(graph)

    @server.tool(name="search_nodes", title="Search Nodes", annotations=READ)
    @tool_errors
    async def search_nodes(
        query: Annotated[
            str, Field(description="The search query to match against entity names, types, and observation content")
        ],
        ctx: Context,
    ) -> CallToolResult:
        """Search for nodes in the knowledge graph based on a query"""
        graph = await on_graph(ctx, lambda g: g.search(query).to_dict())
        return ok(graph)

    @server.tool(name="open_nodes", title="Open Nodes", annotations=READ)
    @tool_errors
    async def open_nodes(
        names: Annotated[list[str], Field(description="An array of entity names to retrieve")],
        ctx: Context,
    ) -> CallToolResult:
        """Open specific nodes in the knowledge graph by their names"""
        graph = await on_graph(ctx, lambda g: g.open(names).to_dict())
        return ok(graph)

    del create_entities, create_relations, add_observations, delete_entities
    del delete_observations, delete_relations, read_graph, search_nodes, open_nodes
