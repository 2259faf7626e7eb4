"""A client configured for ``@modelcontextprotocol/server-memory`` works against ``flowmem mcp`` unchanged.

The reference server's own answers to a client's session (``reference.SCRIPT``,
recorded in ``data/reference_answers.json``) are what ``flowmem mcp`` answers too,
text and structured content alike, and its nine tools take the same arguments
(names, types, required) as the reference's ``tools/list`` says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters

from flowmem.mcp.graph_tools import TOOLS
from flowmem.mcp.server import _tools
from tests.mcp.conftest import stdio_env
from tests.mcp.forked import ForkServer
from tests.mcp.reference import DATA, SCRIPT, run_script

REFERENCE = json.loads(DATA.read_text(encoding="utf-8"))
GRAPH_TOOLS = [tool.name for tool in TOOLS]


def shape(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A JSON schema reduced to what a client's arguments must match: types, properties, required, items."""
    if not isinstance(schema, dict):
        return schema
    defs = {**(defs or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return shape(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    found: dict[str, Any] = {"type": schema.get("type")}
    if "properties" in schema:
        found["properties"] = {k: shape(v, defs) for k, v in schema["properties"].items()}
        found["required"] = sorted(schema.get("required", []))
    if "items" in schema:
        found["items"] = shape(schema["items"], defs)
    return found


def test_the_graph_tools_take_the_reference_servers_arguments(
    tmp_path: Path, forks: ForkServer
) -> None:
    ours = _played(tmp_path, forks)["tools"]
    for name, tool in REFERENCE["tools"].items():
        assert shape(ours[name]["input_schema"]) == shape(tool["input_schema"]), name


def test_a_reference_client_session_gets_the_reference_servers_answers(
    tmp_path: Path, forks: ForkServer
) -> None:
    played = _played(tmp_path, forks)
    for step, (ours, theirs) in enumerate(
        zip(played["answers"], REFERENCE["answers"], strict=True)
    ):
        assert ours == theirs, (step, SCRIPT[step])


_CACHE: dict[str, Any] = {}


def _played(tmp_path: Path, forks: ForkServer) -> dict[str, Any]:
    """The script played once against ``flowmem mcp``, forked (decision 0200; both tests read the one run)."""
    if "played" not in _CACHE:
        database = f"sqlite:///{tmp_path}/reference.db"
        command = forks.command("mcp")
        params = StdioServerParameters(
            command=command[0], args=command[1:], env=stdio_env(database)
        )
        _CACHE["played"] = anyio.run(run_script, params)
    return _CACHE["played"]


def test_each_graph_tool_is_titled_by_its_name_and_hinted_by_what_it_does() -> None:
    tools = {tool.name: tool for tool in _tools() if tool.name in GRAPH_TOOLS}
    assert {name: tool.title for name, tool in tools.items()} == {
        name: name.replace("_", " ").title() for name in GRAPH_TOOLS
    }
    assert tools["open_nodes"].title == "Open Nodes"
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None
        assert hints.read_only_hint is (name in ("read_graph", "search_nodes", "open_nodes")), name
        assert hints.destructive_hint is name.startswith("delete_"), name
