"""WAL pages written per single-message append: flowmem on SQLite against the Agents SDK's ``SQLiteSession``.

Run with ``python bench/wal_pages.py`` (not part of the tests). A count, not a timing:
it does not depend on the machine's load (issue 42 §1). Every system writes its own
fresh file, WAL and ``synchronous=FULL``, filled with ``--length`` messages (batches,
not counted). Before each counted append a side connection truncates the WAL
(``PRAGMA wal_checkpoint(TRUNCATE)``: every frame copied into the database, the log
emptied); after it the log holds exactly the frames that append's commit wrote:
``(size - 32) / (page_size + 24)``. Each frame's header names its page, which
SQLite's ``dbstat`` maps to the table or index it belongs to, so the report says
where the pages go.

Systems: ``flowmem store`` (``SqliteStore.append`` to a session-scope buffer, no
session record), ``flowmem service`` (``MemoryService.append`` in the session scope
with a user: the documented default call, whose first append creates a session owned
by the user, so the owner's usage is counted) and ``agents SQLiteSession``
(``add_items``, one item). Message kinds, ``--cycles`` of each: ``user``, ``tool
call`` (an assistant turn calling one tool), ``tool result``, ``answer`` (an assistant
text) and ``heal``: a user turn while a call is open (MEM-3 writes a placeholder
result and a repair log entry; the Agents session stores the item as it is).

Prints a table (pages per append by kind, mean and min–max) and the pages by table,
and writes every count to ``bench/results/wal_pages.json`` (``--json PATH``). Target
(issue 42 §1): flowmem's pages per message of a conversation (a user message, a tool
call, its result and an answer, one of each) at most ``SQLiteSession``'s, for the
default call and the store's own; each kind's ratio is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json

from flowmem.core import is_healed, prepare
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, open_store

KINDS = ("user", "tool call", "tool result", "answer", "heal")
TURN = KINDS[:4]  # a conversation's messages, one of each: the target's mix
WAL_HEADER = 32
FRAME_HEADER = 24


def message(kind: str, n: int) -> dict[str, Any]:
    """Message ``n`` of ``kind`` in flowmem's shape (OpenAI chat, flat)."""
    cid = f"call_{n}"
    if kind in ("user", "heal"):
        return {"role": "user", "content": f"question {n}: what is the weather in city {n}?"}
    if kind == "tool call":
        call = {
            "id": cid,
            "type": "function",
            "function": {"name": "weather", "arguments": f'{{"city": {n}}}'},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == "tool result":
        return {"role": "tool", "content": f"sunny, {n % 30} degrees", "tool_call_id": cid}
    return {"role": "assistant", "content": f"It is sunny in city {n}."}


def item(kind: str, n: int) -> dict[str, Any]:
    """The same message as an Agents SDK (Responses) input item."""
    cid = f"call_{n}"
    if kind == "tool call":
        return {
            "type": "function_call",
            "call_id": cid,
            "name": "weather",
            "arguments": f'{{"city": {n}}}',
        }
    if kind == "tool result":
        return {
            "type": "function_call_output",
            "call_id": cid,
            "output": f"sunny, {n % 30} degrees",
        }
    return {"role": message(kind, n)["role"], "content": message(kind, n)["content"]}


def script(length: int, cycles: int) -> tuple[list[tuple[str, int]], list[tuple[str, int, bool]]]:
    """The fill (kind, n) and the counted appends (kind, n, counted), in order.

    The fill is whole turns (user, call, result, answer); each counted cycle is one
    turn of each kind, then a call left open and the user turn that heals it (the
    open call's append is counted as a ``tool call`` too).
    """
    turn = ("user", "tool call", "tool result", "answer")
    fill = [(turn[i % 4], i // 4) for i in range(length)]
    counted: list[tuple[str, int, bool]] = []
    base = length // 4 + 1
    for c in range(cycles):
        n = base + 2 * c
        counted += [(k, n, True) for k in turn]
        counted += [("tool call", n + 1, True), ("heal", n + 1, True)]
    return fill, counted


class Wal:
    """A side connection to a database: empties its WAL, reads the frames a commit wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.wal = Path(f"{path}-wal")
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        self.page = int(self.conn.execute("PRAGMA page_size").fetchone()[0])

    def empty(self) -> None:
        """Checkpoint every frame into the database and truncate the log to nothing."""
        busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        size = self.wal.stat().st_size if self.wal.exists() else 0
        if busy or size:
            raise RuntimeError(f"could not empty {self.wal} (busy {busy}, {size} bytes left)")

    def frames(self) -> list[int]:
        """The page number of every frame in the log, in order."""
        data = self.wal.read_bytes() if self.wal.exists() else b""
        if not data:
            return []
        step = self.page + FRAME_HEADER
        count, rest = divmod(len(data) - WAL_HEADER, step)
        if rest:
            raise RuntimeError(f"{self.wal}: {len(data)} bytes is not whole frames of {self.page}")
        return [
            struct.unpack(">I", data[WAL_HEADER + i * step : WAL_HEADER + i * step + 4])[0]
            for i in range(count)
        ]

    def owners(self, pages: set[int]) -> dict[int, tuple[str, str]]:
        """The table or index each page belongs to and its kind, ``leaf`` or ``interior`` (``dbstat``).

        Page 1 is the schema's: SQLite writes it when a commit takes a new page (the
        database's size is in its header).
        """
        if not pages:
            return {}
        marks = ",".join(str(p) for p in sorted(pages))
        found = self.conn.execute(
            f"SELECT pageno, name, pagetype FROM dbstat WHERE pageno IN ({marks})"
        ).fetchall()
        names = {int(p): (str(n), "leaf" if t == "leaf" else "interior") for p, n, t in found}
        names[1] = ("page 1 (the file's size)", "leaf")
        return {p: names.get(p, ("freelist or new", "leaf")) for p in pages}

    def close(self) -> None:
        """Close the side connection."""
        self.conn.close()


class Flowmem:
    """flowmem's ``SqliteStore.append`` (``service``: ``MemoryService.append`` as a user calls it)."""

    def __init__(self, path: Path, service: bool) -> None:
        self.name = "flowmem service" if service else "flowmem store"
        self.path = path
        self.store = open_store(f"sqlite:///{path}")
        self.service = MemoryService(self.store) if service else None
        self.context = ExecutionContext(user_id="bench", session_id="bench")
        self.address = Address("session", "bench", "chat")
        self.stamp = 1_755_000_000

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` in one call."""
        if self.service is not None:
            self.service.append("session", "chat", rows, self.context)
            return
        prepared = []
        for row in rows:
            self.stamp += 1
            prepared.append(prepare(row, self.stamp)[0])
        self.store.append(self.address, prepared)

    def add(self, kind: str, n: int) -> None:
        """One message per append."""
        self.append([message(kind, n)])

    def fill(self, rows: list[tuple[str, int]]) -> None:
        """The buffer's first messages, 500 per append."""
        for start in range(0, len(rows), 500):
            self.append([message(k, n) for k, n in rows[start : start + 500]])

    def close(self) -> None:
        """Close the store."""
        self.store.close()


class AgentsSession:
    """``agents.SQLiteSession.add_items`` with one item, WAL + ``synchronous=FULL``."""

    name = "agents SQLiteSession"

    def __init__(self, path: Path) -> None:
        from agents import SQLiteSession

        class FullSyncSession(SQLiteSession):
            @staticmethod
            def _configure_connection(conn: sqlite3.Connection) -> None:
                SQLiteSession._configure_connection(conn)
                conn.execute("PRAGMA synchronous=FULL")

        self.path = path
        self.loop = asyncio.new_event_loop()
        self.session = FullSyncSession("bench", db_path=path)

    def add(self, kind: str, n: int) -> None:
        """One item per ``add_items``."""
        self.loop.run_until_complete(self.session.add_items([item(kind, n)]))  # type: ignore[list-item]

    def fill(self, rows: list[tuple[str, int]]) -> None:
        """The session's first items, 500 per call."""
        for start in range(0, len(rows), 500):
            batch = [item(k, n) for k, n in rows[start : start + 500]]
            self.loop.run_until_complete(self.session.add_items(batch))  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the session and the loop."""
        self.session.close()
        self.loop.close()


def count(system: Any, length: int, cycles: int) -> dict[str, Any]:
    """Fill the system's fresh file, then count the frames of each counted append.

    Beside each table's pages: its ``interior`` pages (the levels above the leaves)
    and ``rebalanced``, the appends that wrote more than one leaf of it (SQLite moved
    cells between a leaf and its siblings: an insert that did not fit its leaf).
    """
    fill, counted = script(length, cycles)
    system.fill(fill)
    wal = Wal(system.path)
    pages: dict[str, list[int]] = {k: [] for k in KINDS}
    tables: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    interior: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    rebalanced: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    try:
        for kind, n, _ in counted:
            wal.empty()
            system.add(kind, n)
            written = wal.frames()
            pages[kind].append(len(written))
            owners = wal.owners(set(written))
            leaves: dict[str, int] = {}
            for page in written:
                name, level = owners[page]
                tables[kind][name] = tables[kind].get(name, 0) + 1
                if level == "interior":
                    interior[kind][name] = interior[kind].get(name, 0) + 1
                else:
                    leaves[name] = leaves.get(name, 0) + 1
            for name, found in leaves.items():
                if found > 1:
                    rebalanced[kind][name] = rebalanced[kind].get(name, 0) + 1
        durability = report_json.sqlite_durability(system.path, "FULL")
    finally:
        wal.close()
    return {
        "pages": pages,
        "tables": tables,
        "interior": interior,
        "rebalanced": rebalanced,
        "durability": durability,
    }


def _tree(entry: dict[str, Any], kind: str, table: str, written: int, appends: int) -> str:
    """One table's pages per append, with its interior pages and how often its leaves were rebalanced."""
    text = f"{table} {written / appends:.2f}"
    inner = entry["interior"][kind].get(table, 0)
    moved = entry["rebalanced"][kind].get(table, 0)
    if inner or moved:
        text += f" (interior {inner / appends:.2f}, rebalanced {moved / appends:.0%})"
    return text


LAYOUTS = (
    "today",
    "header in the rows' tree",
    "declarations indexed when declared (before decision 0180)",
    "rowid rows",
)


def layouts(path: Path, length: int, cycles: int) -> dict[str, dict[str, float]]:
    """Pages per append by kind in model layouts of flowmem's tables (``--layouts``).

    Not flowmem's code: its stored rows (read back from ``path``, the store's file after
    the count, in position order), its header as one text of the same size, and its
    call ids, replayed into plain tables on a fresh file, the fill in one transaction,
    then each counted append alone after a ``wal_checkpoint(TRUNCATE)``, as ``count``
    does. ``today`` is flowmem's layout (the rows WITHOUT ROWID keyed by buffer and
    position, the header a row of its own table, an open call's declaration in the
    header's list only, an answer an entry carrying the declaration it answered, a
    declaration of a call answered already an entry of its own: decision 0180): for the
    conversation's messages it writes the pages the store wrote, which is the model's
    check (a heal's repair-log entry is not modelled). The others change one thing each:
    the header a row at the end of the buffer's rows (its own key, after every position),
    a declaration indexed when declared (an entry each for a declaration and an answer,
    the layout before decision 0180), the rows a rowid table keyed by position (one
    buffer in the file).
    """
    real = sqlite3.connect(str(path))
    try:
        stored = real.execute(
            "SELECT pos, role, body, tokens, calls FROM buffer_rows ORDER BY pos"
        ).fetchall()
        head = json.dumps([str(v) for v in real.execute("SELECT * FROM buffers").fetchone()])
    finally:
        real.close()
    _, counted = script(length, cycles)
    first = len(stored) - len(counted) - cycles  # a heal writes its placeholder too
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="flowmem-layouts-") as tmp:
        for layout in LAYOUTS:
            found[layout] = _layout(Path(tmp) / "model.db", layout, stored, first, counted, head)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{tmp}/model.db{suffix}").unlink(missing_ok=True)
    return found


def _layout(
    path: Path,
    layout: str,
    stored: list[tuple[Any, ...]],
    first: int,
    counted: list[tuple[str, int, bool]],
    head: str,
) -> dict[str, float]:
    """One model layout's pages per append by kind (``layouts``)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=wal")
    rowid, inside, declared = (layout == LAYOUTS[3], layout == LAYOUTS[1], layout == LAYOUTS[2])
    if rowid:
        conn.execute("CREATE TABLE r (pos INTEGER PRIMARY KEY, b, role, body, tokens, calls)")
    else:
        conn.execute(
            "CREATE TABLE r (b, pos, role, body, tokens, calls, PRIMARY KEY (b, pos)) WITHOUT ROWID"
        )
    conn.execute("CREATE TABLE h (id INTEGER PRIMARY KEY, head)")
    conn.execute(
        "CREATE TABLE c (b, cid, pos, ord, answered, PRIMARY KEY (b, cid, pos)) WITHOUT ROWID"
    )
    carries = "" if declared else ", dpos, ord"  # an answer's entry carries its declaration
    conn.execute(
        f"CREATE TABLE a (b, cid, pos, healed{carries}, PRIMARY KEY (b, cid, pos)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO h VALUES (1, ?)", (head,))
    listed: dict[str, list[tuple[int, int]]] = {}  # the open calls (the header's list)
    answered: set[str] = set()

    def write(pos: int, role: str, body: str, tokens: Any, calls: Any) -> None:
        if rowid:
            conn.execute(
                "INSERT INTO r VALUES (?, 1, ?, ?, ?, ?)", (pos, role, body, tokens, calls)
            )
        else:
            conn.execute(
                "INSERT INTO r VALUES (1, ?, ?, ?, ?, ?)", (pos, role, body, tokens, calls)
            )
        for order, cid in enumerate(json.loads(calls) if calls else ()):
            if declared or cid in answered:
                conn.execute(
                    "INSERT OR IGNORE INTO c VALUES (1, ?, ?, ?, ?)",
                    (cid, pos, order, int(cid in answered)),
                )
            else:
                listed.setdefault(cid, []).append((pos, order))
        if role == "tool":
            row = json.loads(body)
            cid, healed = row["metadata"]["tool_call_id"], int(is_healed(row))
            if declared:
                conn.execute("INSERT INTO a VALUES (1, ?, ?, ?)", (cid, pos, healed))
            else:  # one entry: the answer and the listed declaration it answers
                at = sorted(listed.pop(cid, []))
                first = at[0] if at else (None, None)
                conn.execute("INSERT INTO a VALUES (1, ?, ?, ?, ?, ?)", (cid, pos, healed, *first))
                for at_pos, order in at[1:]:
                    conn.execute(
                        "INSERT OR IGNORE INTO c VALUES (1, ?, ?, ?, 0)", (cid, at_pos, order)
                    )
            answered.add(cid)

    def header(pos: int) -> None:
        if inside:  # the counters an append changes (count, last major, bytes, tokens, version)
            counters = json.dumps([pos >> 20, pos >> 20, pos * 3, pos // 4, pos])
            conn.execute(
                "INSERT OR REPLACE INTO r VALUES (1, ?, 'h', ?, 0, NULL)", (1 << 62, counters)
            )
        else:
            conn.execute("UPDATE h SET head = ? WHERE id = 1", (head + str(pos),))

    conn.execute("BEGIN")
    for row in stored[:first]:
        write(*row)
    header(stored[first - 1][0])
    conn.execute("COMMIT")
    pages: dict[str, list[int]] = {k: [] for k in KINDS}
    at = first
    wal = Path(f"{path}-wal")
    for kind, _, _ in counted:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = stored[at : at + (2 if kind == "heal" else 1)]
        at += len(rows)
        conn.execute("BEGIN")
        for row in rows:
            write(*row)
        header(rows[-1][0])
        conn.execute("COMMIT")
        pages[kind].append((wal.stat().st_size - WAL_HEADER) // (4096 + FRAME_HEADER))
    conn.close()
    means = {k: statistics.fmean(v) for k, v in pages.items()}
    means["turn"] = statistics.fmean(means[k] for k in TURN)
    return means


def summary(pages: list[int]) -> dict[str, float]:
    """Mean, min and max of the counts."""
    return {"mean": statistics.fmean(pages), "min": min(pages), "max": max(pages)}


def main(argv: list[str] | None = None) -> int:
    """Count the pages; exit 1 when flowmem writes more than ``SQLiteSession`` for a kind."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1_000, help="messages filled before counting")
    parser.add_argument("--cycles", type=int, default=20, help="counted appends of each kind")
    parser.add_argument(
        "--layouts",
        action="store_true",
        help="also the pages flowmem's rows would write in model layouts (decisions 0178, 0180)",
    )
    report_json.add_arguments(parser, "wal_pages", "--length 100 --cycles 3")
    args = parser.parse_args(argv)
    length, cycles = (100, 3) if args.quick else (args.length, args.cycles)
    meta = report_json.environment(("openai-agents",))
    targets = report_json.Targets(args.quick)
    makers: list[tuple[str, Callable[[Path], Any]]] = [
        ("flowmem store", lambda p: Flowmem(p, service=False)),
        ("flowmem service", lambda p: Flowmem(p, service=True)),
        ("agents SQLiteSession", AgentsSession),
    ]
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flowmem-wal-") as tmp:
        for name, make in makers:
            system = make(Path(tmp) / f"{name.replace(' ', '-')}.db")
            try:
                found[name] = count(system, length, cycles)
            finally:
                system.close()
            if name == "flowmem store" and args.layouts:
                modelled = layouts(system.path, length, cycles)
    durability = {name: entry.pop("durability") for name, entry in found.items()}
    report_json.describe(meta, durability)
    print(
        f"\nWAL pages per single-message append, {length:,} messages before, {cycles} of each kind\n"
    )
    print("| system | " + " | ".join(KINDS) + " | all |")
    print("|---|" + "---:|" * (len(KINDS) + 1))
    for name, entry in found.items():
        cells = []
        for kind in KINDS:
            s = summary(entry["pages"][kind])
            cells.append(f"{s['mean']:.2f} ({s['min']}–{s['max']})")
        every = [p for kind in KINDS for p in entry["pages"][kind]]
        entry["summary"] = {kind: summary(entry["pages"][kind]) for kind in KINDS}
        entry["summary"]["all"] = summary(every)
        print(f"| {name} | " + " | ".join(cells) + f" | {statistics.fmean(every):.2f} |")
    print("\npages per append by table or index (mean)\n")
    for name, entry in found.items():
        for kind in KINDS:
            n = len(entry["pages"][kind])
            parts = sorted(entry["tables"][kind].items(), key=lambda kv: -kv[1])
            print(f"- {name}, {kind}: " + ", ".join(_tree(entry, kind, t, c, n) for t, c in parts))
    print(
        "\nflowmem ÷ SQLiteSession, pages per append by kind (not targets: a call or a result names"
    )
    print("a call id in an index of its own, a heal writes two rows and a log entry)")
    theirs = found["agents SQLiteSession"]["summary"]
    for name in ("flowmem store", "flowmem service"):
        mine = found[name]["summary"]
        print(
            f"- {name}: "
            + ", ".join(f"{k} {mine[k]['mean'] / theirs[k]['mean']:.2f}" for k in KINDS)
        )
    print(
        f"\nTargets (issue 42 §1): pages per message of a conversation ({', '.join(TURN)}, one each)"
    )
    for entry in found.values():
        entry["summary"]["turn"] = {
            "mean": statistics.fmean(entry["summary"][k]["mean"] for k in TURN)
        }
    for name in ("flowmem store", "flowmem service"):
        mine = found[name]["summary"]["turn"]["mean"]
        label = (
            f"{name} / SQLiteSession pages per message ({mine:.2f} / {theirs['turn']['mean']:.2f})"
        )
        targets.check(label, mine / theirs["turn"]["mean"], 1.0, True)
    if args.layouts:
        print(
            "\nModel layouts (--layouts): flowmem's rows replayed into plain tables, pages per message"
        )
        print(
            f"of a conversation ({', '.join(TURN)}); 'today' is checked against the store's count\n"
        )
        for layout, means in modelled.items():
            kinds = ", ".join(f"{k} {means[k]:.2f}" for k in KINDS)
            print(f"- {layout}: {means['turn']:.2f} ({kinds})")
        print(f"- the store's own count: {found['flowmem store']['summary']['turn']['mean']:.2f}")
    plan: dict[str, Any] = {"length": length, "cycles": cycles}
    if args.layouts:
        plan["layouts"] = modelled
    report_json.write(
        args.json,
        "wal_pages",
        argv,
        meta,
        durability,
        targets.items,
        {"plan": plan, "systems": found},
        args.quick,
    )
    return 0 if args.quick or not targets.failed else 1


if __name__ == "__main__":
    sys.exit(main())
