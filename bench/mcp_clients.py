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

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import anyio
import report_json
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

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


def main(argv: list[str]) -> int:
    """Run both servers under the same load; print the counts, write the JSON; 1 when flowmem lost a write."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reference-bin", default=None, help="an installed mcp-server-memory (else npx)")
    parser.add_argument("--no-reference", action="store_true", help="flowmem mcp only")
    parser.add_argument(
        "--flowmem-command",
        default=None,
        help="a JSON list: the command that starts flowmem mcp --user bench "
        "(default: this interpreter running flowmem's CLI)",
    )
    report_json.add_arguments(parser, "mcp_clients", "2 clients, 2 rounds, flowmem mcp only")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.rounds, args.no_reference = 2, 2, args.reference_bin is None
    meta = report_json.environment(["mcp"])
    work = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    database = work / "flowmem.db"
    results: dict[str, Any] = {}
    command = [sys.executable, "-c", "from flowmem.cli import main; main()", "mcp", "--user", "bench"]
    if args.flowmem_command:
        command = json.loads(args.flowmem_command)
    flowmem = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={"FLOWMEM_DATABASE_URL": f"sqlite:///{database}", "PATH": "/usr/bin:/bin"},
    )
    results["flowmem mcp (SQLite)"] = anyio.run(run, flowmem, args.clients, args.rounds)
    durability = {"flowmem mcp (SQLite)": report_json.flowmem_sqlite_durability(database, "FULL")}
    binary = args.reference_bin or shutil.which("npx")
    if args.no_reference or binary is None:
        results["reference (server-memory)"] = {"skipped": "--no-reference, or no npx and no --reference-bin"}
    else:
        options = [] if args.reference_bin else ["-y", "@modelcontextprotocol/server-memory"]
        reference = StdioServerParameters(
            command=binary,
            args=options,
            env={"MEMORY_FILE_PATH": str(work / "memory.jsonl"), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
        results["reference (server-memory)"] = anyio.run(run, reference, args.clients, args.rounds)
        durability["reference (server-memory)"] = report_json.no_database(
            "one JSON-lines file, written whole to a temporary file and renamed (no fsync)"
        )
    report_json.describe(meta, durability)
    for name, result in results.items():
        print(f"{name}: {json.dumps(result)}")
    targets = report_json.Targets(args.quick)
    ours = results["flowmem mcp (SQLite)"]
    targets.check("flowmem mcp: writes lost", float(sum(ours["lost"].values())), 0, at_most=True)
    targets.check("flowmem mcp: facts stored twice", float(ours["duplicates"]), 0, at_most=True)
    targets.check("flowmem mcp: calls answered with an error", float(ours["errors"]), 0, at_most=True)
    report_json.write(args.json, "mcp_clients", argv, meta, durability, targets.items, results, args.quick)
    shutil.rmtree(work, ignore_errors=True)
    return 0 if args.quick or not targets.failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
