"""Many MCP clients writing one memory at once: what the reference memory server loses, and flowmem mcp.

Run with ``python bench/mcp_clients.py`` (not part of the tests; the reference server
needs ``npx`` and the npm registry, or ``--reference-bin`` naming an installed
``mcp-server-memory``). Each of ``--clients`` clients (default 8) starts its own
server process over one store, as one user's agents each configured with the same
``command`` do: the reference server over one ``MEMORY_FILE_PATH`` JSON-lines file,
``flowmem mcp`` over one SQLite file. After one client creates the entity ``Team``,
every client at once runs ``--rounds`` rounds of the reference's own tools:
``add_observations`` to ``Team``, ``create_entities`` of a new entity and
``create_relations`` from it to ``Team``. Then a fresh client reads the graph and
counts what is missing (a write whose call was answered as done but is not in the
graph) and what is there twice.

Printed: for each server, the writes answered, the errors, the writes lost and the
duplicates; written to ``bench/results/mcp_clients.json`` (``--json PATH``).
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/http.py would shadow the standard library's http (the SDK's HTTP client needs it)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


QUIET = open("/dev/null", "w")  # noqa: SIM115 (the servers' stderr, for the whole run)


async def _session(params: StdioServerParameters) -> Any:
    return stdio_client(params, errlog=QUIET)


async def _client(params: StdioServerParameters, n: int, rounds: int, tally: Counter[str]) -> None:
    async with await _session(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for j in range(rounds):
            calls = [
                ("add_observations", {"observations": [{"entityName": "Team", "contents": [f"obs {n}-{j}"]}]}),
                ("create_entities", {"entities": [{"name": f"E{n}-{j}", "entityType": "member", "observations": []}]}),
                ("create_relations", {"relations": [{"from": f"E{n}-{j}", "to": "Team", "relationType": "in"}]}),
            ]
            for name, arguments in calls:
                try:
                    result = await session.call_tool(name, arguments)
                    tally["errors" if result.is_error else "answered"] += 1
                except Exception:  # a crashed call: counted, the run goes on
                    tally["errors"] += 1


async def _graph(params: StdioServerParameters) -> dict[str, Any]:
    async with await _session(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("read_graph", {})
        graph: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        return graph


async def _create_team(params: StdioServerParameters) -> None:
    async with await _session(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool(
            "create_entities", {"entities": [{"name": "Team", "entityType": "group", "observations": []}]}
        )


async def run(params: StdioServerParameters, clients: int, rounds: int) -> dict[str, Any]:
    """Every client at once against its own process over one store; what the graph kept."""
    await _create_team(params)
    tally: Counter[str] = Counter()
    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for n in range(clients):
            group.start_soon(_client, params, n, rounds, tally)
    seconds = time.monotonic() - started
    graph = await _graph(params)
    expected = clients * rounds
    names = Counter(e["name"] for e in graph["entities"])
    team = next((e for e in graph["entities"] if e["name"] == "Team"), {"observations": []})
    observations = Counter(team["observations"])
    relations = Counter((r["from"], r["relationType"], r["to"]) for r in graph["relations"])
    kept = {
        "observations": sum(1 for n in range(clients) for j in range(rounds) if observations[f"obs {n}-{j}"]),
        "entities": sum(1 for n in range(clients) for j in range(rounds) if names[f"E{n}-{j}"]),
        "relations": sum(1 for n in range(clients) for j in range(rounds) if relations[(f"E{n}-{j}", "in", "Team")]),
    }
    return {
        "clients": clients,
        "rounds": rounds,
        "seconds": round(seconds, 2),
        "writes": 3 * expected,
        "answered": tally["answered"],
        "errors": tally["errors"],
        "lost": {kind: expected - count for kind, count in kept.items()},
        "duplicates": sum(c - 1 for c in [*names.values(), *observations.values(), *relations.values()] if c > 1),
        "team_survived": "Team" in names,
    }


def main() -> None:
    """Run both servers under the same load; print and write the counts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reference-bin", default=None, help="an installed mcp-server-memory (else npx)")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "mcp_clients.json"))
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    found: dict[str, Any] = {}
    flowmem = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from flowmem.cli import main; main()", "mcp", "--user", "bench"],
        env={"FLOWMEM_DATABASE_URL": f"sqlite:///{work}/flowmem.db", "PATH": "/usr/bin:/bin"},
    )
    found["flowmem mcp (SQLite)"] = anyio.run(run, flowmem, options.clients, options.rounds)
    binary = options.reference_bin or shutil.which("npx")
    if binary is None:
        found["reference (server-memory)"] = {"skipped": "no npx and no --reference-bin"}
    else:
        args = [] if options.reference_bin else ["-y", "@modelcontextprotocol/server-memory"]
        reference = StdioServerParameters(
            command=binary,
            args=args,
            env={"MEMORY_FILE_PATH": str(work / "memory.jsonl"), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
        found["reference (server-memory)"] = anyio.run(run, reference, options.clients, options.rounds)
    for name, result in found.items():
        print(f"{name}: {json.dumps(result)}")
    Path(options.json).parent.mkdir(parents=True, exist_ok=True)
    Path(options.json).write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
