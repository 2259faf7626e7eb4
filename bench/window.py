"""Token windows over a 10,000-message buffer (issue 28 §3): read from the end, O(kept) rows.

Run with ``python bench/window.py`` (``--quick`` for a smoke run). One buffer of
``--messages`` mixed rows (a system prompt; user turns, some with an inline PNG;
assistant turns with a reasoning part and two parallel tool calls, their two
results, a closing answer) is stored in a SQLite file (default durability) and in
a throwaway PostgreSQL server (durable unless ``--postgres-nondurable``, or
``--postgres URL``). Measured side by side, in one process, rounds interleaved:

- ``window``: ``MemoryService.load_raw(..., max_tokens=--budget)`` (the default
  counter: counts stored per row at append; the rows read newest first);
- ``last=K``: ``load_raw(..., last=K)`` for the same number K of rows the window kept;
- ``load + trim_messages``: LangChain's answer: the whole buffer loaded, converted to
  LangChain messages (``flowmem.integrations.langchain.row_to_message``) and trimmed
  by ``langchain_core.messages.trim_messages`` with its pair-safe options
  (``strategy="last"``, ``start_on="human"``, ``include_system=True``) and the same
  counter (each message's flowmem count, looked up: the counter costs nothing);
- ``trim_messages`` alone, on the messages already in memory.

Reported: median and minimum over ``--rounds`` rounds of each, the ratio window /
last=K (target <= 2 on each backend), the rows and tokens kept, and whether each
answer is sendable (``check_sendable``). JSON to ``bench/results/window.json``.
"""

from __future__ import annotations

import argparse
import base64
import gc
import os
import statistics
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
from langchain_core.messages import BaseMessage, trim_messages

from flowmem.core import check_sendable
from flowmem.core.tokens import estimate_tokens
from flowmem.integrations.langchain import message_to_row, row_to_message
from flowmem.service import MemoryService
from flowmem.store import Store, open_store

SCOPE, SCOPE_ID, KEY = "user", "alice", "chat"
ALLOWED = {"unanswered_call", "system_after_non_system"}


def _png(width: int, height: int) -> str:
    """A small valid PNG's base64 whose header says ``width`` x ``height`` (the counter reads it)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


def history(messages: int) -> list[dict[str, Any]]:
    """A mixed buffer of ``messages`` rows: tool pairs, reasoning, images, a system prompt."""
    rows: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    image = _png(1024, 768)
    turn = 0
    while len(rows) < messages:
        text = f"Question {turn}: what is the weather in city {turn % 97}? " * 3
        content: Any = text
        if turn % 20 == 0:
            content = [{"type": "text", "text": text}, {"type": "image", "data": image, "media_type": "image/png"}]
        calls = [
            {"id": f"c{turn}a", "name": "weather", "arguments": f'{{"city": "{turn % 97}"}}'},
            {"id": f"c{turn}b", "name": "time", "arguments": f'{{"city": "{turn % 97}"}}'},
        ]
        rows += [
            {"role": "user", "content": content},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "The user asks for weather and time; call both. " * 2},
                    {"type": "text", "text": "Let me check."},
                ],
                "tool_calls": calls,
            },
            {"role": "tool", "tool_call_id": f"c{turn}a", "content": f"{turn % 30} C, clear"},
            {"role": "tool", "tool_call_id": f"c{turn}b", "content": f"{turn % 24}:00"},
            {"role": "assistant", "content": f"It is {turn % 30} C and {turn % 24}:00 there. " * 2},
        ]
        turn += 1
    return rows[:messages]


def fill(service: MemoryService, rows: list[dict[str, Any]]) -> None:
    """Append the history in batches of 500 (the buffer's rules run as for any writer)."""
    for start in range(0, len(rows), 500):
        service.append_raw(SCOPE, SCOPE_ID, KEY, rows[start : start + 500])


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``work`` took, and what it returned: collected before, no collection during.

    The ways run in turn, and one (``load + trim_messages``) leaves 10,000 LangChain
    messages behind: a collection of them would land in whichever call came next.
    """
    gc.collect()
    gc.disable()
    try:
        began = time.perf_counter()
        out = work()
        return time.perf_counter() - began, out
    finally:
        gc.enable()


def sendable(rows: list[dict[str, Any]]) -> bool:
    """No violation but the buffer's own (an open call at the tail, a late system row)."""
    return not [v for v in check_sendable(rows) if v.code not in ALLOWED]


def _numbered(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give each message its index as id: the counter looks its count up by it (trim copies them)."""
    for index, message in enumerate(messages):
        message.id = str(index)
    return messages


def measure(
    service: MemoryService, budget: int, rounds: int, trimming: bool
) -> dict[str, Any]:
    """Each way ``rounds`` times, interleaved; their medians, minimums and answers."""
    window = service.load_raw(SCOPE, SCOPE_ID, KEY, max_tokens=budget)
    kept = len(window.messages)
    whole = service.load_raw(SCOPE, SCOPE_ID, KEY).messages
    messages = _numbered([row_to_message(row) for row in whole])
    counts = {m.id: estimate_tokens(row) for m, row in zip(messages, whole, strict=True)}

    def one(message: BaseMessage) -> int:
        found = counts.get(message.id)
        return estimate_tokens(message_to_row(message)) if found is None else found

    def count(found: list[BaseMessage]) -> int:  # trim_messages calls it with lists
        return sum(map(one, found))

    def trim(found: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(
            found,
            max_tokens=budget,
            token_counter=count,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    def load_and_trim() -> list[BaseMessage]:
        loaded = service.load_raw(SCOPE, SCOPE_ID, KEY).messages
        converted = _numbered([row_to_message(r) for r in loaded])
        counts.update({m.id: estimate_tokens(r) for m, r in zip(converted, loaded, strict=True)})
        return trim(converted)

    ways: dict[str, Callable[[], Any]] = {
        "window": lambda: service.load_raw(SCOPE, SCOPE_ID, KEY, max_tokens=budget),
        "last=K": lambda: service.load_raw(SCOPE, SCOPE_ID, KEY, last=kept),
    }
    if trimming:
        ways["load + trim_messages"] = load_and_trim
        ways["trim_messages alone"] = lambda: trim(messages)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, work in ways.items():
            times[name].append(timed(work)[0])
    trimmed = trim(messages)
    trimmed_rows = [message_to_row(m) for m in trimmed]
    out: dict[str, Any] = {
        name: {"median_ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3}
        for name, t in times.items()
    }
    out["kept_rows"] = kept
    out["cut"] = window.window.to_dict() if window.window else None
    out["window_sendable"] = sendable(window.messages)
    out["trim_kept_rows"] = len(trimmed)
    out["trim_tokens"] = count(trimmed)
    out["trim_sendable"] = sendable(trimmed_rows)
    out["ratio_median"] = statistics.median(times["window"]) / statistics.median(times["last=K"])
    out["ratio_min"] = min(times["window"]) / min(times["last=K"])
    return out


@contextmanager
def stores(args: argparse.Namespace) -> Iterator[dict[str, tuple[Store, dict[str, Any]]]]:
    """The SQLite file and the PostgreSQL database, each with its durability entry."""
    folder = Path(tempfile.mkdtemp(prefix="flowmem-window-"))
    path = folder / "window.db"
    sqlite = open_store(f"sqlite:///{path}")
    opened = {"sqlite": (sqlite, report_json.flowmem_sqlite_durability(path, "FULL"))}
    try:
        if args.no_postgres:
            yield opened
            return
        with pgserver.server(args.postgres, durable=not args.postgres_nondurable) as (url, _):
            postgres = open_store(url)
            opened["postgres"] = (postgres, pgserver.postgres_durability(url))
            try:
                yield opened
            finally:
                postgres.close()
    finally:
        sqlite.close()


def main(argv: list[str]) -> int:
    """Run the bench; print the table; write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--budget", type=int, default=8_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    report_json.add_arguments(parser, "window", "1,000 messages, 5 rounds")
    pgserver.add_arguments(parser, "a PostgreSQL server URL (default: a throwaway one)")
    args = parser.parse_args(argv)
    pgserver.check(parser, args.postgres_nondurable, args.postgres)
    if args.quick:
        args.messages, args.rounds = 1_000, 5
    meta = report_json.environment(["langchain-core"])
    rows = history(args.messages)
    targets = report_json.Targets(args.quick)
    results: dict[str, Any] = {"messages": args.messages, "budget": args.budget, "rounds": args.rounds}
    with stores(args) as opened:
        durability = {name: entry for name, (_, entry) in opened.items()}
        report_json.describe(meta, durability)
        for rounds in range(3):  # three runs: the target is judged on each
            for name, (store, _) in opened.items():
                service = MemoryService(store)
                if rounds == 0:
                    fill(service, rows)
                found = measure(service, args.budget, args.rounds, trimming=True)
                results.setdefault(name, []).append(found)
        print(f"\n{args.messages} messages, budget {args.budget} tokens, {args.rounds} rounds x 3 runs")
        print(f"{'backend':<10}{'way':<24}{'median ms':>11}{'min ms':>9}")
        for name in opened:
            runs = results[name]
            for way in ("window", "last=K", "load + trim_messages", "trim_messages alone"):
                median = statistics.median(r[way]["median_ms"] for r in runs)
                least = min(r[way]["min_ms"] for r in runs)
                print(f"{name:<10}{way:<24}{median:>11.2f}{least:>9.2f}")
            last = runs[-1]
            print(
                f"{'':<10}kept {last['kept_rows']} rows / {last['cut']['tokens']} tokens "
                f"(sendable {last['window_sendable']}); trim_messages kept {last['trim_kept_rows']} "
                f"rows / {last['trim_tokens']} tokens (sendable {last['trim_sendable']})"
            )
            for run, found in enumerate(runs, 1):
                targets.check(
                    f"{name} run {run}: window / load(last=K), median", found["ratio_median"], 2, at_most=True
                )
    report_json.write(
        args.json, "window", argv, meta, durability, targets.items, results, args.quick
    )
    return 0 if args.quick or not targets.failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
