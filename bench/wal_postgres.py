"""WAL per append on PostgreSQL: flowmem's appends beside langchain-postgres, in records and bytes.

Not a test, and load-independent: what each append writes to the WAL does not depend
on how busy the machine is. One throwaway durable server (``fsync``,
``synchronous_commit``, ``full_page_writes`` on, as initdb sets them; autovacuum
off while counting), a fresh database per system and per run. Each system fills a
fresh buffer (``--fill`` messages, not counted), then a ``CHECKPOINT``, then
appends one message at a time; the WAL insert position
(``pg_current_wal_insert_lsn()``) is read before and after every append, and
``pg_waldump`` over the whole range gives each append its records, full-page images
and bytes (the records' total length, what ``pg_stat_wal`` counts as ``wal_bytes``;
the server's own records, ``RUNNING_XACTS`` and checkpoints, are left out).

The systems:

- ``flowmem store``: ``Store.append`` of one message at session scope (the tuned call);
- ``flowmem guarded``: the same with a ``WriteGuard`` (token and session), what the
  HTTP API's session-scope appends send (docs/decisions/0014);
- ``flowmem service``: ``MemoryService.append`` at user scope, as a user writes it
  (the owner's usage counted);
- ``langchain-postgres``: ``PostgresChatMessageHistory.add_messages`` of one message.

The scenarios: ``conversation`` (bench/store.py's: user, assistant calling a tool,
the tool's result, answer; each kind reported apart, and ``conversation``: their mean) and ``heal`` (an assistant call,
then a user turn, which flowmem heals with a placeholder result, MEM-3; langchain
stores the same two messages as they come).

What a user's disk sees: the bytes counted are the records' total length with their
full-page images (``bytes``; ``no-img`` without them). Each fresh database is
``VACUUM``ed once its system has made its tables and before the fill: the catalog rows
the migrations left dead are pruned there, as a server's autovacuum would, not by the
first counted append that reads them. The default server checkpoints every 5 minutes
(``checkpoint_timeout``), so an append pays a full-page image for each page it is the
first to touch since the last checkpoint: ``--checkpoint-every N`` makes that happen
every ``N`` counted appends (the default, 0: one checkpoint before the first counted
append only); ``--checkpoint-every 1`` is a busy server where each conversation gets
one append per checkpoint. ``--detail`` gives each table's full-page images and their bytes.
``--setup SQL`` (repeatable) runs a statement on each of flowmem's fresh databases once
its schema is made, before the fill: a variant of the schema (a fillfactor, an index)
measured without a migration, labelled in the output and the JSON (decision 0181 measured
its layout models so, with ``PYTHONPATH`` on a changed copy of ``src``).
``--vacuumed`` runs a ``VACUUM`` before each such ``CHECKPOINT``, as
``bench/peers_postgres.py`` does before its ``pg_stat_wal`` count and as a server's
autovacuum does from time to time: the free-space map then knows the room that pruning
left on older pages, and inserts go there (each such page imaged once after a
checkpoint) instead of only to a table's last page.

    python bench/wal_postgres.py                 # a throwaway server, 3 runs
    python bench/wal_postgres.py --detail        # and what each kind of append writes, by table
    python bench/wal_postgres.py --window 40     # flowmem's buffer windowed: evicting as it appends
    python bench/wal_postgres.py --quick         # a smoke run
    python bench/wal_postgres.py --fill 1000 --checkpoint-every 20   # a longer buffer, checkpoints during the run
    python bench/wal_postgres.py --fill 1000 --appends 200 --vacuumed   # peers_postgres' pg_stat_wal regime, per kind
    python bench/wal_postgres.py --setup "ALTER TABLE buffer_call_ids SET (fillfactor = 50)"   # a schema variant

Target (issue 42 #1): flowmem's WAL bytes per append at most langchain-postgres's
for the same message, each kind, at the minimum of the runs.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
import siblings

PACKAGES = ("psycopg", "langchain-postgres")
_MESSAGES = siblings.load("store")
SYSTEMS = ("flowmem store", "flowmem guarded", "flowmem service", "langchain-postgres")
KINDS = ("user", "assistant call", "tool result", "assistant text", "heal", "conversation")
# the server's own records, not an append's
_SERVER_OWN = re.compile(r"desc: (RUNNING_XACTS|CHECKPOINT_ONLINE|CHECKPOINT_SHUTDOWN|SWITCH)")
_LINE = re.compile(
    r"rmgr: (?P<rmgr>\S+)\s+len \(rec/tot\):\s*(?P<rec>\d+)/\s*(?P<tot>\d+), tx:\s*\d+, "
    r"lsn: (?P<lsn>[0-9A-F]+/[0-9A-F]+), prev \S+ desc: (?P<desc>.*)$"
)
_REL = re.compile(r"rel \d+/\d+/(\d+)")


def lsn_int(text: str) -> int:
    """A WAL position ``X/Y`` as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass
class Append:
    """One counted append: its kind and WAL range, then what pg_waldump found in it."""

    kind: str
    start: int
    end: int
    records: int = 0
    fpi: int = 0
    bytes: int = 0  # the records' total length (with their page images)
    image_bytes: int = 0  # of which full-page images
    parts: Counter[str] = field(default_factory=Counter)  # "rmgr op table" -> records
    part_images: Counter[str] = field(
        default_factory=Counter
    )  # "rmgr op table" -> full-page images
    part_bytes: Counter[str] = field(default_factory=Counter)  # "rmgr op table" -> their bytes
    # "rmgr op table" -> of their bytes, the full-page images' (what the holes leave of each page)
    part_image_bytes: Counter[str] = field(default_factory=Counter)


class System:
    """One system on its own fresh database: fill a buffer, then single appends."""

    name = ""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scenario = ""

    def start(self, scenario: str) -> None:
        """Use a fresh buffer (or session) for ``scenario``."""
        raise NotImplementedError

    def append(self, message: dict[str, Any], i: int) -> None:
        """Append one message (flowmem's shape; ``i`` its number in the conversation)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connections."""


class Flowmem(System):
    """flowmem's ``Store.append`` (plain or guarded) or ``MemoryService.append``."""

    def __init__(self, url: str, mode: str, window: int = 0) -> None:
        from flowmem.store import open_store

        super().__init__(url)
        self.name = f"flowmem {mode}"
        self.mode = mode
        self.window = window  # max_messages of every append (0: no window)
        self.store = open_store(url)
        self.guard: Any = None
        self.key: Any = None

    def start(self, scenario: str) -> None:
        """A fresh buffer (a fresh session and token when guarded)."""
        from flowmem.store import Address, SessionRecord, WriteGuard

        tag = uuid.uuid4().hex[:8]
        self.key = Address("session", f"wal-{tag}", "chat_history")
        if self.mode == "guarded":
            from flowmem.auth import create_token

            self.store.create_session(SessionRecord(f"wal-{tag}", "bench", "bench"))
            _, record = create_token(self.store, "bench")
            self.guard = WriteGuard(record.id, f"wal-{tag}")
        if self.mode == "service":
            from flowmem.scope import ExecutionContext
            from flowmem.service import MemoryService

            self.service = MemoryService(self.store)
            self.context = ExecutionContext(user_id=f"wal-{tag}")
            self.key = Address("user", f"wal-{tag}", "chat_history")

    def append(self, message: dict[str, Any], i: int) -> None:
        """One message per append."""
        from flowmem.core import prepare

        if self.mode == "service":
            self.service.append("user", self.key.key, message, self.context, self.window)
            return
        row = prepare(message, 1_755_000_000 + i)[0]
        self.store.append(self.key, [row], guard=self.guard, max_messages=self.window)

    def close(self) -> None:
        """Close the store."""
        self.store.close()


class LangchainPostgres(System):
    """langchain-postgres ``PostgresChatMessageHistory.add_messages``, one message per call."""

    name = "langchain-postgres"

    def __init__(self, url: str) -> None:
        import psycopg
        from langchain_postgres import PostgresChatMessageHistory

        super().__init__(url)
        self.conn = psycopg.connect(url)
        self.table = "message_store"
        PostgresChatMessageHistory.create_tables(self.conn, self.table)
        self.history: Any = None

    def start(self, scenario: str) -> None:
        """A fresh session id."""
        from langchain_postgres import PostgresChatMessageHistory

        self.history = PostgresChatMessageHistory(
            self.table, str(uuid.uuid4()), sync_connection=self.conn
        )

    def append(self, message: dict[str, Any], i: int) -> None:
        """The same message as a LangChain message, one per ``add_messages``."""
        self.history.add_messages([langchain_of(message, i)])

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def langchain_of(message: dict[str, Any], i: int) -> Any:
    """flowmem's message as the LangChain message bench/store.py pairs it with."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    role = message["role"]
    if role == "user":
        return HumanMessage(message["content"], id=f"m{i}")
    if role == "tool":
        return ToolMessage(message["content"], tool_call_id=message["tool_call_id"], id=f"m{i}")
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "args": {"city": i}}
        for c in message.get("tool_calls", ())
    ]
    return AIMessage(message.get("content", ""), tool_calls=calls, id=f"m{i}")


def conversation(fill: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    """bench/store.py's conversation: the fill (kind ``""``), then ``count`` counted appends."""
    names = ("user", "assistant call", "tool result", "assistant text")
    return [("" if i < fill else names[i % 4], _MESSAGES.turn(i)) for i in range(fill + count)]


def healing(fill: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The conversation's fill, then pairs: an assistant call, a user turn that heals it."""
    out = conversation(fill, 0)
    for n in range(count // 2):
        i = fill + 2 * n
        call = _MESSAGES.turn(4 * (i // 4) + 1)
        call = {**call, "tool_calls": [{**call["tool_calls"][0], "id": f"call_h{n}"}]}
        out.append(("assistant call", call))
        out.append(("heal", {"role": "user", "content": f"question {i}: and the wind?"}))
    return out


SCENARIOS: dict[str, Callable[[int, int], list[tuple[str, dict[str, Any]]]]] = {
    "conversation": conversation,
    "heal": healing,
}


def one(conn: Any, query: str) -> Any:
    """The first column of a query's first row."""
    row = conn.execute(query).fetchone()
    return None if row is None else row[0]


def make(name: str, url: str, window: int = 0) -> System:
    """The system called ``name`` on the database at ``url`` (flowmem's appends with ``window``)."""
    if name == "langchain-postgres":
        return LangchainPostgres(url)
    return Flowmem(url, name.split()[1], window)


def measure(
    admin: Any,
    base_url: str,
    name: str,
    scenario: str,
    fill: int,
    count: int,
    wal_dir: str,
    window: int = 0,
    checkpoint_every: int = 0,
    vacuumed: bool = False,
    setup: tuple[str, ...] = (),
) -> list[Append]:
    """One system, one scenario, on a fresh database: each counted append's WAL.

    ``checkpoint_every``: a CHECKPOINT before every that many counted appends (0: before
    the first only); ``vacuumed``: a VACUUM before each of them; ``setup``: statements run
    on a flowmem system's database once its schema is made.
    """
    database = f"wal_{uuid.uuid4().hex[:10]}"
    admin.execute(f"CREATE DATABASE {database}")
    url = base_url.rsplit("/", 1)[0] + f"/{database}"
    system = make(name, url, window)
    if setup and isinstance(system, Flowmem):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for statement in setup:
                conn.execute(statement)
    appends: list[Append] = []
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as probe:

            def lsn() -> int:
                return lsn_int(str(one(probe, "SELECT pg_current_wal_insert_lsn()::text")))

            system.start(scenario)
            # the catalog rows the system's migrations left dead, pruned now (autovacuum's
            # work on a user's server), not by the first append that reads their pages
            probe.execute("VACUUM")
            steps = SCENARIOS[scenario](fill, count)
            for i, (kind, message) in enumerate(steps):
                # the first counted append: equal page images for all; then every N
                if kind and (
                    not appends or (checkpoint_every and len(appends) % checkpoint_every == 0)
                ):
                    if vacuumed:  # the free-space map filled, as autovacuum leaves it
                        probe.execute("VACUUM")
                    probe.execute("CHECKPOINT")
                if not kind:
                    system.append(message, i)
                    continue
                before = lsn()
                system.append(message, i)
                appends.append(Append(kind, before, lsn()))
            names = {
                int(node): str(rel)
                for node, rel in probe.execute(
                    "SELECT pg_relation_filenode(oid), relname FROM pg_class "
                    "WHERE pg_relation_filenode(oid) IS NOT NULL"
                ).fetchall()
            }
            dboid = int(
                one(probe, "SELECT oid FROM pg_database WHERE datname = current_database()")
            )
            # the first segment by name: pg_waldump -p alone reads the segment size from
            # whichever file it finds first, which may be a preallocated empty one
            first = last = ""
            if appends:
                first = str(one(probe, f"SELECT pg_walfile_name('{_lsn_text(appends[0].start)}')"))
                # and the last one's: a run may cross segments (a windowed buffer writes more)
                last = str(one(probe, f"SELECT pg_walfile_name('{_lsn_text(appends[-1].end)}')"))
    finally:
        system.close()
    waldump(appends, os.path.join(wal_dir, first), names, dboid, os.path.join(wal_dir, last))
    admin.execute(f"DROP DATABASE {database}")
    return appends


def waldump(
    appends: list[Append], first: str, names: dict[int, str], dboid: int, last: str = ""
) -> None:
    """Give each append the records pg_waldump finds in its range (``first``, ``last``: its segments' paths)."""
    if not appends:
        return
    start, end = appends[0].start, appends[-1].end
    binary = str(pgserver.bindir() / "pg_waldump")
    done = subprocess.run(
        [binary, "-s", _lsn_text(start), "-e", _lsn_text(end), first]
        + ([last] if last and last != first else []),
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout
    if not out.strip():  # nothing read: say why rather than count zero
        raise SystemExit(f"pg_waldump read nothing from {first}: {done.stderr.strip()}")
    starts = [a.start for a in appends]
    import bisect

    for line in out.splitlines():
        found = _LINE.match(line)
        if found is None or _SERVER_OWN.search(line):
            continue
        at = lsn_int(found["lsn"])
        index = bisect.bisect_right(starts, at) - 1
        if index < 0 or at >= appends[index].end:
            continue
        append = appends[index]
        total, rec = int(found["tot"]), int(found["rec"])
        append.records += 1
        append.bytes += total
        images = line.count("FPW")
        if images:
            append.fpi += images
            append.image_bytes += total - rec
        desc = found["desc"]
        op = desc.split(" ", 1)[0].rstrip(":")
        rel = _REL.search(desc)
        table = names.get(int(rel.group(1)), "?") if rel else ""
        if rel and f"/{dboid}/" not in rel.group(0) and table == "?":
            table = "(shared)"
        part = f"{found['rmgr']} {op} {table}".strip()
        append.parts[part] += 1
        append.part_bytes[part] += total
        append.part_images[part] += images
        if images:
            append.part_image_bytes[part] += total - rec


def _lsn_text(value: int) -> str:
    """A number as a WAL position ``X/Y``."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def summary(appends: list[Append]) -> dict[str, dict[str, Any]]:
    """Per kind: appends, records, full-page images, bytes (and without images) per append."""
    by_kind: dict[str, list[Append]] = defaultdict(list)
    for append in appends:
        by_kind[append.kind].append(append)
    found = {}
    for kind, group in by_kind.items():
        n = len(group)
        parts: Counter[str] = Counter()
        part_bytes: Counter[str] = Counter()
        part_images: Counter[str] = Counter()
        part_image_bytes: Counter[str] = Counter()
        for append in group:
            parts.update(append.parts)
            part_bytes.update(append.part_bytes)
            part_images.update(append.part_images)
            part_image_bytes.update(append.part_image_bytes)
        found[kind] = {
            "appends": n,
            "records": sum(a.records for a in group) / n,
            "fpi": sum(a.fpi for a in group) / n,
            "bytes": sum(a.bytes for a in group) / n,
            "bytes_without_images": sum(a.bytes - a.image_bytes for a in group) / n,
            "lsn_bytes": sum(a.end - a.start for a in group) / n,
            "parts": {k: v / n for k, v in sorted(parts.items())},
            "part_bytes": {k: v / n for k, v in sorted(part_bytes.items())},
            "part_images": {k: v / n for k, v in sorted(part_images.items())},
            "part_image_bytes": {k: v / n for k, v in sorted(part_image_bytes.items())},
        }
    return found


def main(argv: list[str] | None = None) -> int:
    """Count each system's WAL per append; exit 1 when flowmem writes more than langchain-postgres."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pgserver.add_arguments(parser)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fill", type=int, default=100, help="messages before the counted ones")
    parser.add_argument("--appends", type=int, default=400, help="counted appends per scenario")
    parser.add_argument("--only", default=None, help="comma list of systems (default: all)")
    parser.add_argument(
        "--detail",
        action="store_true",
        help="print each kind's records by table (their number and bytes per append)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=0,
        help="flowmem's appends with max_messages (a windowed buffer, evicting as it goes; "
        "langchain-postgres keeps every message); default 0: no window",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="a CHECKPOINT before every N counted appends, as a server's checkpoints fall during "
        "a longer run (default 0: one, before the first counted append)",
    )
    parser.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="SQL",
        help="a statement run on each of flowmem's fresh databases once its schema is made "
        "(a schema variant: a fillfactor, an index); repeatable",
    )
    parser.add_argument(
        "--vacuumed",
        action="store_true",
        help="a VACUUM before each CHECKPOINT (bench/peers_postgres.py's pg_stat_wal regime, a "
        "server whose autovacuum has run: inserts fill the room pruning left on older pages)",
    )
    report_json.add_arguments(parser, "wal_postgres", "tiny sizes, one run")
    args = parser.parse_args(argv)
    runs, fill, count = (1, 20, 40) if args.quick else (max(1, args.runs), args.fill, args.appends)
    chosen = [s for s in SYSTEMS if args.only is None or s in args.only.split(",")]
    meta = report_json.environment(PACKAGES)
    samples: dict[str, dict[str, list[dict[str, dict[str, Any]]]]] = {
        s: {sc: [] for sc in SCENARIOS} for s in chosen
    }
    import psycopg

    with pgserver.server(None, not args.postgres_nondurable) as (url, _):
        durability = {"PostgreSQL": pgserver.postgres_durability(url)}
        windowed = f", flowmem's window {args.window} messages" if args.window else ""
        if args.checkpoint_every:
            windowed += f", a checkpoint every {args.checkpoint_every} counted appends"
        if args.vacuumed:
            windowed += ", a VACUUM before each checkpoint"
        for statement in args.setup:
            windowed += f", flowmem's schema with: {statement}"
        print(
            f"WAL per append on PostgreSQL: {runs} runs, fill {fill}, {count} counted appends{windowed}"
        )
        report_json.describe(meta, durability)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET autovacuum = off")
            admin.execute("SELECT pg_reload_conf()")
            wal_dir = os.path.join(str(one(admin, "SHOW data_directory")), "pg_wal")
            for run in range(runs):
                turn = run % len(chosen)
                for name in chosen[turn:] + chosen[:turn]:
                    for scenario in SCENARIOS:
                        found = measure(
                            admin,
                            url,
                            name,
                            scenario,
                            fill,
                            count,
                            wal_dir,
                            args.window,
                            args.checkpoint_every,
                            args.vacuumed,
                            tuple(args.setup),
                        )
                        kinds = summary(found)
                        if scenario == "conversation":  # every append of it: the mean message
                            every = [replace(a, kind="conversation") for a in found]
                            kinds |= summary(every)
                        samples[name][scenario].append(kinds)
    results = tables(samples, args.detail)
    targets = report_json.Targets(args.quick)
    judge(results, targets)
    report_json.write(
        args.json,
        "wal_postgres",
        argv,
        meta,
        durability,
        targets.items,
        {
            "runs": runs,
            "fill": fill,
            "appends": count,
            "window": args.window,
            "checkpoint_every": args.checkpoint_every,
            "vacuumed": args.vacuumed,
            "setup": args.setup,
            "wal_per_append": results,
        },
        args.quick,
    )
    if args.quick:
        return 0
    return 1 if targets.failed else 0


def tables(
    samples: dict[str, dict[str, list[dict[str, dict[str, Any]]]]], detail: bool
) -> dict[str, dict[str, dict[str, Any]]]:
    """Print and return, per system and kind, the min / median / max over runs of each figure."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    print(
        f"\n{'system':20} {'kind':15} {'records':>8} {'fpi':>6} {'bytes':>7} {'no-img':>7}  (median of runs; bytes min-max)"
    )
    for name, scenarios in samples.items():
        results[name] = {}
        for kind in KINDS:
            runs = [run[kind] for per in scenarios.values() for run in per if kind in run]
            if not runs:
                continue
            if kind == "assistant call":  # both scenarios make calls: the conversation's
                runs = [run[kind] for run in scenarios["conversation"]]
            entry = {
                figure: {
                    "min": min(r[figure] for r in runs),
                    "median": statistics.median(r[figure] for r in runs),
                    "max": max(r[figure] for r in runs),
                }
                for figure in ("records", "fpi", "bytes", "bytes_without_images", "lsn_bytes")
            }
            entry["parts"] = runs[0]["parts"]
            entry["part_bytes"] = runs[0]["part_bytes"]
            entry["part_images"] = runs[0].get("part_images", {})
            entry["part_image_bytes"] = runs[0].get("part_image_bytes", {})
            results[name][kind] = entry
            med = {
                k: v["median"]
                for k, v in entry.items()
                if k not in ("parts", "part_bytes", "part_images", "part_image_bytes")
            }
            print(
                f"{name:20} {kind:15} {med['records']:8.2f} {med['fpi']:6.3f} {med['bytes']:7.0f} "
                f"{med['bytes_without_images']:7.0f}  ({entry['bytes']['min']:.0f}-{entry['bytes']['max']:.0f})"
            )
            if detail:
                for part, n in entry["parts"].items():
                    size = entry["part_bytes"][part]
                    images = entry["part_images"].get(part, 0)
                    image_bytes = entry["part_image_bytes"].get(part, 0)
                    fpi = (
                        f"  ({images:.3f} full-page images, {image_bytes:.1f} bytes of them)"
                        if images
                        else ""
                    )
                    print(f"{'':38} {n:6.2f} {size:7.1f}  {part}{fpi}")
    return results


def judge(results: dict[str, dict[str, dict[str, Any]]], targets: report_json.Targets) -> None:
    """flowmem's bytes per append ÷ langchain-postgres's, each kind: at most 1.0 (the largest of the runs)."""
    peer = results.get("langchain-postgres")
    if peer is None:
        return
    print(
        "\nTargets: flowmem's WAL bytes per append / langchain-postgres's <= 1.0 (max over runs / min over runs)"
    )
    for name, kinds in results.items():
        if name == "langchain-postgres":
            continue
        for kind, entry in kinds.items():
            theirs = peer.get(kind)
            if theirs is None:
                continue
            ratio = entry["bytes"]["max"] / theirs["bytes"]["min"]
            targets.check(
                f"{name} {kind}: WAL bytes / langchain-postgres's", ratio, 1.0, at_most=True
            )


if __name__ == "__main__":
    sys.exit(main())
