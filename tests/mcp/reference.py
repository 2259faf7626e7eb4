"""A client written for the reference memory server: its tool names, arguments and how it reads answers.

``SCRIPT`` is a session of such a client (the calls ``@modelcontextprotocol/server-memory``'s
README shows, and its edge cases: an existing entity, a repeated observation, a
deletion of what is not there). ``run_script`` plays it against any server and
returns what a client reads back: each answer's text (parsed as JSON where it is
JSON) and its structured content. ``tests/mcp/data/reference_answers.json`` holds
the reference server's own answers to it (recorded with ``python -m tests.mcp.reference
--record``, which needs ``npx``), and its ``tools/list``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

DATA = Path(__file__).parent / "data" / "reference_answers.json"

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),
    ("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
        {"name": "Anthropic", "entityType": "organization", "observations": []},
    ]}),
    ("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "robot", "observations": ["ignored"]},
        {"name": "Lisbon", "entityType": "city", "observations": ["capital of Portugal", "sunny"]},
    ]}),
    ("create_relations", {"relations": [
        {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
        {"from": "John_Smith", "to": "Lisbon", "relationType": "lives_in"},
    ]}),
    ("create_relations", {"relations": [{"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}]}),
    ("add_observations", {"observations": [
        {"entityName": "John_Smith", "contents": ["Graduated in 2019", "Speaks fluent Spanish"]},
        {"entityName": "Anthropic", "contents": ["Makes Claude"]},
    ]}),
    ("search_nodes", {"query": "spanish"}),
    ("search_nodes", {"query": "CITY"}),
    ("open_nodes", {"names": ["Anthropic", "Nobody"]}),
    ("delete_observations", {"deletions": [
        {"entityName": "John_Smith", "observations": ["Speaks fluent Spanish", "never said"]},
        {"entityName": "Nobody", "observations": ["x"]},
    ]}),
    ("delete_relations", {"relations": [
        {"from": "John_Smith", "to": "Lisbon", "relationType": "lives_in"},
        {"from": "A", "to": "B", "relationType": "none"},
    ]}),
    ("read_graph", {}),
    ("delete_entities", {"entityNames": ["Anthropic", "Nobody"]}),
    ("read_graph", {}),
]  # fmt: skip
"""The calls, in order, and their arguments."""


def _read(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


async def run_script(params: StdioServerParameters) -> dict[str, Any]:
    """Play ``SCRIPT`` against the server ``params`` starts; its tools and what each call answered."""
    with open("/dev/null", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            answers = []
            for name, arguments in SCRIPT:
                result = await session.call_tool(name, arguments)
                text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                answers.append({
                    "tool": name,
                    "is_error": bool(result.is_error),
                    "text": _read(text),
                    "structured": result.structured_content,
                })
    return {
        "tools": {t.name: {"input_schema": t.input_schema} for t in tools},
        "answers": answers,
    }


def reference_params(memory_file: Path) -> StdioServerParameters:
    """The reference server, run by npx, keeping its graph in ``memory_file``."""
    return StdioServerParameters(
        command="npx",
        args=["-y", "@modelcontextprotocol/server-memory"],
        env={"MEMORY_FILE_PATH": str(memory_file), "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )


def main() -> None:
    """``--record``: run the script against the reference server and write ``DATA``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--memory-file", default="/tmp/reference-memory.jsonl")
    options = parser.parse_args()
    if not options.record:
        parser.error("nothing to do: --record")
    Path(options.memory_file).unlink(missing_ok=True)
    found = anyio.run(run_script, reference_params(Path(options.memory_file)))
    DATA.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {DATA}", file=sys.stderr)


if __name__ == "__main__":
    main()
