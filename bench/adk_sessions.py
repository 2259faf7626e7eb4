"""Benchmark of Google ADK sessions: ``FlowmemSessionService.get_session`` beside ADK's ``DatabaseSessionService`` (issue 42 §4).

Run with ``python bench/adk_sessions.py`` (not part of the tests; ``--quick`` is the
smoke run ``tests/bench/test_adk_sessions_bench.py`` makes). What an ADK app does per
turn before it calls the model: ``get_session`` of the whole session. Two services
per backend, each on storage of its own, made fresh for every run:

- SQLite: ``FlowmemSessionService("sqlite:///…")`` (flowmem's default durability, WAL +
  ``synchronous=FULL``, its group commit) and ``DatabaseSessionService("sqlite+aiosqlite:///…")``
  (SQLite's defaults: a rollback journal, ``synchronous=FULL``);
- PostgreSQL (``--postgres URL``, or ``start``: a throwaway durable server): each in a
  database of its own on the same server, ``postgresql://…`` and
  ``postgresql+psycopg://…``.

Each session is filled to the measured length (``--lengths``, default 100 and 1,000
events) by ``append_event`` of whole turns (a user message, a function call, its
response, a text answer, about 200 characters each), the services taking turns;
then ``--reads`` reads of the whole session each, taking turns read by read with the
order rotated, and as many with ``GetSessionConfig(num_recent_events=20)``. A run's
figure per service is its median read; its ratio is ADK's ÷ flowmem's (higher:
flowmem faster). ``--runs`` runs (default 3) give min, median and max of the per-run
ratios. Target (issue 42 §4): ``get_session`` ≥ 1.5× ``DatabaseSessionService`` at
1,000 events on both backends, at the minimum of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as ``python bench/adk_sessions.py``, this folder is first on sys.path, where a
# sibling module (bench/http.py) would shadow the standard library's ``http``. Drop it;
# the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
from google.adk.events import Event, EventActions
from google.adk.sessions import DatabaseSessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from flowmem.integrations.adk import FlowmemSessionService

BENCH = "adk_sessions"
APP, USER = "bench", "ana"
TEXT = "The quick brown fox jumps over the lazy dog, again and again, for a benchmark. " * 3
T0 = 1_760_000_000.0
RECENT = 20


def turn(index: int) -> list[Event]:
    """One turn's four events: the user's message, a function call, its response, the answer."""
    at = T0 + index * 10
    inv = f"inv-{index}"
    call_id = f"call-{index}"

    def made(n: int, author: str, role: str, part: types.Part) -> Event:
        return Event(
            id=f"e{index}-{n}", invocation_id=inv, author=author, timestamp=at + n,
            content=types.Content(role=role, parts=[part]), actions=EventActions(),
        )

    return [
        made(0, "user", "user", types.Part(text=f"{index}: {TEXT[:200]}")),
        made(1, "agent", "model", types.Part(function_call=types.FunctionCall(
            id=call_id, name="search", args={"q": TEXT[:80]}))),
        made(2, "agent", "user", types.Part(function_response=types.FunctionResponse(
            id=call_id, name="search", response={"result": TEXT[:200]}))),
        made(3, "agent", "model", types.Part(text=TEXT[:200])),
    ]


class System:
    """One service on its own fresh storage."""

    def __init__(self, name: str, backend: str, make: Callable[[], Any], close: Callable[[], None]) -> None:
        self.name, self.backend = name, backend
        self.service = make()
        self._close = close
        self.session: Any = None

    async def create(self) -> None:
        """Create the session."""
        self.session = await self.service.create_session(app_name=APP, user_id=USER, session_id="s1")

    async def append(self, event: Event) -> None:
        """Append one event (a copy: a service may change the event it is given)."""
        await self.service.append_event(self.session, event.model_copy(deep=True))

    async def read(self, config: GetSessionConfig | None) -> int:
        """``get_session``; its event count."""
        found = await self.service.get_session(app_name=APP, user_id=USER, session_id="s1", config=config)
        return len(found.events)

    async def close(self) -> None:
        """Close the service, then drop its storage."""
        await self.service.close()
        self._close()


def database_url(url: str, database: str) -> str:
    """``url`` naming another database of the same server."""
    head, _, tail = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{database}" + (f"?{tail}" if tail else "")


def fresh_database(url: str) -> tuple[str, Callable[[], None]]:
    """A new database on the server at ``url``: its URL, and how to drop it."""
    import psycopg

    name = f"adkbench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return database_url(url, name), drop


def systems(folder: Path, postgres: str | None) -> list[System]:
    """The services of one run, each on new storage."""
    made = [
        System("flowmem", "sqlite", lambda: FlowmemSessionService(f"sqlite:///{folder / 'flowmem.db'}"), lambda: None),
        System(
            "adk_database", "sqlite",
            lambda: DatabaseSessionService(f"sqlite+aiosqlite:///{folder / 'adk.db'}"), lambda: None,
        ),
    ]
    if postgres:
        mine, drop_mine = fresh_database(postgres)
        theirs, drop_theirs = fresh_database(postgres)
        made.append(System("flowmem", "postgres", lambda: FlowmemSessionService(mine), drop_mine))
        adk_url = theirs.replace("postgresql://", "postgresql+psycopg://", 1)
        made.append(System("adk_database", "postgres", lambda: DatabaseSessionService(adk_url), drop_theirs))
    return made


async def _timed(system: System, config: GetSessionConfig | None, expect: int) -> float:
    start = time.perf_counter()
    count = await system.read(config)
    elapsed = time.perf_counter() - start
    if count != expect:
        raise RuntimeError(f"{system.name} on {system.backend}: {count} events, expected {expect}")
    return elapsed


async def one_run(length: int, reads: int, run: int, postgres: str | None) -> dict[str, dict[str, Any]]:
    """One run at ``length``: fresh storage, filled, then the reads in rotation."""
    with tempfile.TemporaryDirectory(prefix="bench-adk-") as tmp:
        made = systems(Path(tmp), postgres)
        try:
            for system in made:
                await system.create()
            for index in range(length // 4):
                for event in turn(index):
                    for system in made:
                        await system.append(event)
            times: dict[str, dict[str, list[float]]] = {
                f"{s.name}/{s.backend}": {"whole": [], "recent": []} for s in made
            }
            for step in range(reads):
                shift = (step + run) % len(made)
                order = made[shift:] + made[:shift]
                for system in order:
                    times[f"{system.name}/{system.backend}"]["whole"].append(await _timed(system, None, length))
                for system in order:
                    recent = GetSessionConfig(num_recent_events=RECENT)
                    times[f"{system.name}/{system.backend}"]["recent"].append(
                        await _timed(system, recent, min(RECENT, length))
                    )
        finally:
            for system in made:
                await system.close()
    return {key: {kind: statistics.median(v) for kind, v in kinds.items()} for key, kinds in times.items()}


def spread(values: list[float]) -> dict[str, float]:
    """min, median, max."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main(argv: list[str]) -> int:
    """Run the bench, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reads", type=int, default=9)
    report_json.add_arguments(parser, BENCH, "20 events, 2 runs of 3 reads")
    pgserver.add_arguments(parser, "a PostgreSQL server URL, or 'start' for a throwaway one")
    args = parser.parse_args(argv)
    pgserver.check(parser, args.postgres_nondurable, args.postgres != "start" and args.postgres)
    if args.quick:
        args.lengths, args.runs, args.reads = [20], 2, 3
    meta = report_json.environment(["google-adk", "sqlalchemy", "aiosqlite", "psycopg"])
    targets = report_json.Targets(args.quick)
    results: dict[str, Any] = {"lengths": {}}
    with pgserver.server(
        None if args.postgres in (None, "start") else args.postgres, not args.postgres_nondurable
    ) if args.postgres else _nothing() as (url, _):
        durability: dict[str, dict[str, Any]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            probe = FlowmemSessionService(f"sqlite:///{tmp}/probe.db")
            asyncio.run(probe.create_session(app_name=APP, user_id=USER))
            durability["flowmem/sqlite"] = report_json.flowmem_sqlite_durability(f"{tmp}/probe.db", "FULL")
            asyncio.run(probe.close())
            adk = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp}/adk.db")
            asyncio.run(adk.create_session(app_name=APP, user_id=USER))
            asyncio.run(adk.close())
            durability["adk_database/sqlite"] = report_json.sqlite_durability(
                f"{tmp}/adk.db", "FULL", "SQLite's default synchronous (aiosqlite sets none)"
            )
        if url:
            durability["postgres"] = pgserver.postgres_durability(url)
        report_json.describe(meta, durability)
        for length in args.lengths:
            runs = [asyncio.run(one_run(length, args.reads, run, url)) for run in range(args.runs)]
            print(f"\n{length} events ({args.runs} runs of {args.reads} reads; ms, median read per run)")
            for key in runs[0]:
                whole = " ".join(f"{r[key]['whole'] * 1000:7.2f}" for r in runs)
                recent = " ".join(f"{r[key]['recent'] * 1000:7.2f}" for r in runs)
                print(f"  {key:22} whole {whole}   last {RECENT} {recent}")
            ratios: dict[str, list[float]] = {}
            for backend in ("sqlite", "postgres") if url else ("sqlite",):
                for kind in ("whole", "recent"):
                    ratios[f"{kind}/{backend}"] = [
                        r[f"adk_database/{backend}"][kind] / r[f"flowmem/{backend}"][kind] for r in runs
                    ]
            for label, values in ratios.items():
                s = spread(values)
                print(f"  {label:22} ADK ÷ flowmem: min {s['min']:.2f}  median {s['median']:.2f}  max {s['max']:.2f}")
                if label.startswith("whole/") and length >= 1000:
                    targets.check(f"get_session {label} at {length} (min of runs)", s["min"], 1.5)
            results["lengths"][str(length)] = {
                "runs": runs,
                "ratios": {label: {"per_run": v, **spread(v)} for label, v in ratios.items()},
            }
    report_json.write(args.json, BENCH, argv, meta, durability, targets.items, results, args.quick)
    return 0


class _nothing:
    """No server: (None, None)."""

    def __enter__(self) -> tuple[None, None]:
        return None, None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
