"""Where a guarded PostgreSQL append's server work goes: the guard and the buffer's owner apart (not a test).

Decision 0174. bench/peers_postgres.py's plain append writes a buffer owned by nobody
(its session has no owner); its guarded append, as the HTTP API's, writes its session's
buffer, which has an owner, with a ``WriteGuard`` (token and session). Three systems
here, each ``Store.append`` of one message of bench/store.py's conversation (user,
assistant calling a tool, the result, the answer) on a 100-row buffer, on known facts
(one round trip):

- ``plain``: no guard, a buffer owned by nobody (the bench's plain append);
- ``plain owned``: no guard, the owned session's buffer (the reservation trigger
  ``flowmem_buffer_reserve`` runs on every header update: the owner's cost);
- ``guarded``: the guard's locks and check, the owned buffer (the bench's guarded append).

What is measured, per append:

- default: the backend's CPU (``/proc/<pid>/schedstat``), the systems in turns in
  blocks of 40 (min and median of the blocks), on a throwaway non-durable server (the
  commit's flush would hide the CPU; ``--durable``: initdb's settings);
- ``--callgrind``: the instructions the backend runs (valgrind's callgrind, the server
  started under it): load-independent. Each system runs twice on a fresh connection,
  with 12 and 12 + N appends (``--appends``, default 96); the difference of the two
  backends' totals, over N, is one append's.

With ``--callgrind --first``, the fixed cost of a fresh connection instead (decision 0182):
each system's store, on a connection of its own, creates its session and token (the
guarded one), fills its buffer with the 100 rows and makes K single appends, for K in
``FIRST``; the differences of the backends' totals are the first appends' instructions,
one by one (each message kind's statement is prepared and planned at its first use),
then per append (min of ``--repeats`` backends per K). ``--guarded-fill``: the guarded
system's buffer filled with its guard, as bench/peers_postgres.py fills it since decision 0189.

With ``--in-order``, where the bench puts that cost: ``bench/peers_postgres.py``'s own runs
(``--only flowmem,guarded,langchain``, a durable throwaway server, ``--runs`` runs) with every
timed append kept in order; per system and length, the first ``FIRST_TIMED`` appends' time
above as many medians, and the run's total (the rate's denominator).

With ``--statements`` the verdict statement's guard is also run in turns as it was
before decision 0174 (the guard's subquery pulled up: its check twice) and as now, the
rest alike, in transactions rolled back (``before``/``after`` rows); with ``--forms``,
whole guarded appends by two stores in turns, one sending the check as before 0174 (wall,
client CPU and server CPU per append; ``--durable`` for initdb's settings). JSON on stdout's last
line. Compare two trees' code with ``PYTHONPATH=<tree>/src``.

    .venv/bin/python scripts/pg_guarded_cost.py [--callgrind [--first]] [--in-order] [--statements]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import pgserver
import siblings

_MESSAGES = siblings.load("store")  # turn(i): bench/store.py's conversation
LENGTH, BLOCK, WARM = 100, 40, 12
SYSTEMS = ("plain", "plain owned", "guarded")


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far (ns)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


@contextmanager
def callgrind_postgres() -> Iterator[tuple[str, Path]]:
    """A throwaway non-durable server whose processes run under callgrind; yield (URL, output folder).

    A backend's file (``cg.<pid>``) is written when it exits.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
    base = Path(tempfile.mkdtemp(prefix="flowmem-guarded-cost-"))
    base.chmod(0o755)  # the server's user runs the wrapper and writes the files
    out = base / "cg"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    wrapper = base / "postgres"
    wrapper.write_text(
        f"#!/bin/sh\nexec {valgrind} --tool=callgrind --trace-children=yes"
        f' --callgrind-out-file={out}/cg.%p {pgserver.bindir() / "postgres"} "$@"\n'
    )
    wrapper.chmod(0o755)
    try:
        with pgserver.throwaway_postgres(False, 20, program=wrapper) as (url, _):
            yield url, out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def instructions_of(out: Path, pid: int, timeout: float = 120.0) -> int:
    """The instructions backend ``pid`` ran in its life (its callgrind file, once it exited)."""
    path = out / f"cg.{pid}"
    end = time.time() + timeout
    while time.time() < end:
        if path.exists():
            found = re.search(r"^(?:summary|totals):\s+(\d+)", path.read_text(), re.M)
            if found:
                return int(found.group(1))
        time.sleep(0.2)
    raise RuntimeError(f"no callgrind output for backend {pid}")


class World:
    """The sessions, token and buffers of the three systems (filled by a store of its own)."""

    def __init__(self, url: str) -> None:
        from flowmem.auth import create_token
        from flowmem.store import SessionRecord, WriteGuard, open_store

        self.url = url
        tag = uuid.uuid4().hex[:8]
        self.free, self.owned = f"free-{tag}", f"owned-{tag}"
        filler = open_store(url)
        filler.create_session(SessionRecord(self.owned, "bench", "bench"))
        _, record = create_token(filler, "bench")
        self.guard = WriteGuard(record.id, self.owned)
        self.filler = filler
        self.fills = 0

    def buffer(self, system: str) -> Any:
        """A new buffer of ``system``'s kind holding ``LENGTH`` rows of the conversation."""
        from flowmem.core import prepare
        from flowmem.store import Address

        self.fills += 1
        session = self.free if system == "plain" else self.owned
        address = Address("session", session, f"chat-{self.fills}")
        rows = [prepare(_MESSAGES.turn(i), 1_755_000_000 + i)[0] for i in range(LENGTH)]
        self.filler.append(address, rows)
        return address

    def appender(self, store: Any, system: str) -> Callable[[], None]:
        """One append of the next message to a new buffer of ``system`` through ``store``."""
        from flowmem.core import prepare

        address = self.buffer(system)
        guard = self.guard if system == "guarded" else None
        turn = iter(range(LENGTH, 10**9))

        def append() -> None:
            i = next(turn)
            store.append(address, prepare(_MESSAGES.turn(i), 1_755_000_000 + i), guard=guard)

        return append


def one_connection(url: str) -> Any:
    """A store with one pooled connection (its backend's pid is the append's)."""
    from flowmem.store import open_store

    return open_store(f"{url}?pool_min=1&pool_max=1")


def backend_pid(store: Any) -> int:
    """The pid of the store's one backend."""
    with store._connection() as conn:  # noqa: SLF001 - its backend, for its counts
        return int(conn.info.backend_pid)


def by_callgrind(url: str, out: Path, appends: int) -> dict[str, float]:
    """Instructions per append of each system (the difference of two fresh backends' totals)."""
    world = World(url)
    found: dict[str, float] = {}
    for system in SYSTEMS:
        totals = []
        for count in (WARM, WARM + appends):
            store = one_connection(url)
            pid = backend_pid(store)
            append = world.appender(store, system)
            for _ in range(count):
                append()
            store.close()
            totals.append(instructions_of(out, pid))
        found[system] = (totals[1] - totals[0]) / appends
        print(f"{system:12} {found[system]:10.0f} instructions per append", flush=True)
    world.filler.close()
    return found


FIRST = (0, 1, 2, 3, 4, 8, 16)  # appends after the fill whose backends --first counts


def first_appends(url: str, out: Path, system: str, count: int, guarded_fill: bool = False) -> int:
    """Instructions of a fresh backend that sets ``system``'s buffer up and makes ``count`` appends.

    ``guarded_fill``: the guarded system's buffer filled with its guard (the bench's fill
    since decision 0189), else without (before it).
    """
    from flowmem.auth import create_token
    from flowmem.core import prepare
    from flowmem.store import Address, SessionRecord, WriteGuard

    store = one_connection(url)
    pid = backend_pid(store)
    tag = uuid.uuid4().hex[:8]
    guard = None
    if system != "plain":  # the owned session, made on this connection as the bench makes it
        store.create_session(SessionRecord(f"owned-{tag}", "bench", "bench"))
        _, record = create_token(store, "bench")
        guard = WriteGuard(record.id, f"owned-{tag}") if system == "guarded" else None
    session = f"free-{tag}" if system == "plain" else f"owned-{tag}"
    address = Address("session", session, "chat")
    rows = [prepare(_MESSAGES.turn(i), 1_755_000_000 + i)[0] for i in range(LENGTH + count)]
    store.append(address, rows[:LENGTH], guard=guard if guarded_fill else None)
    for row in rows[LENGTH:]:
        store.append(address, [row], guard=guard)
    store.close()
    return instructions_of(out, pid)


def by_first(
    url: str, out: Path, repeats: int, guarded_fill: bool = False
) -> dict[str, dict[str, float]]:
    """Instructions of each system's first appends on a fresh connection: one by one, then per append."""
    one_connection(url).close()  # the schema, made before any counted backend
    found: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        totals = {
            k: min(first_appends(url, out, system, k, guarded_fill) for _ in range(repeats))
            for k in FIRST
        }
        found[system] = {}
        for before, after in itertools.pairwise(FIRST):
            label = f"{after}" if after - before == 1 else f"{before + 1}-{after}"
            found[system][label] = (totals[after] - totals[before]) / (after - before)
        spent = totals[FIRST[-1]] - totals[0]
        print(
            f"{system:12} "
            + " ".join(f"#{k} {v / 1e3:7.0f}k" for k, v in found[system].items())
            + f"  (the {FIRST[-1]} together {spent / 1e6:.2f}M)",
            flush=True,
        )
    return found


FIRST_TIMED = 8  # the first timed appends --in-order sets apart


def in_order(runs: int) -> list[dict[str, dict[str, dict[str, float]]]]:
    """bench/peers_postgres.py's runs, each timed append kept: the first appends' excess, per length."""
    peers = siblings.load("peers_postgres")
    found: list[dict[str, dict[str, dict[str, float]]]] = []
    with pgserver.throwaway_postgres(True) as (url, _):
        for number in range(runs):
            with peers.fresh_databases(url) as fresh:
                systems = peers.build(fresh, peers.Plan(), True, "flowmem,guarded,langchain")
                try:
                    peers.run(systems, peers.Plan().rounds, number)
                finally:
                    for system in systems:
                        system.close()
            run: dict[str, dict[str, dict[str, float]]] = {}
            for system in systems:
                run[system.name] = {}
                for length, times in system.latencies[0].items():
                    median = statistics.median(times)
                    excess = sum(times[:FIRST_TIMED]) - FIRST_TIMED * median
                    run[system.name][str(length)] = {
                        "first_excess_ms": excess * 1e3,
                        "total_ms": sum(times) * 1e3,
                        "median_us": median * 1e6,
                    }
                print(
                    f"run {number} {system.name:30} "
                    + " ".join(
                        f"{n}: {v['first_excess_ms']:5.2f} of {v['total_ms']:6.1f} ms"
                        for n, v in run[system.name].items()
                    ),
                    flush=True,
                )
            found.append(run)
    return found


def by_cpu(url: str, blocks: int) -> dict[str, dict[str, float]]:
    """Backend CPU per append of each system, in turns (min and median of the blocks, µs)."""
    world = World(url)
    stores = {system: one_connection(url) for system in SYSTEMS}
    appends = {system: world.appender(stores[system], system) for system in SYSTEMS}
    pids = {system: backend_pid(stores[system]) for system in SYSTEMS}
    for system in SYSTEMS:
        for _ in range(WARM):
            appends[system]()
    times: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    for number in range(blocks):
        turn = number % len(SYSTEMS)
        for system in SYSTEMS[turn:] + SYSTEMS[:turn]:
            start = cpu_ns(pids[system])
            for _ in range(BLOCK):
                appends[system]()
            times[system].append((cpu_ns(pids[system]) - start) / 1e3 / BLOCK)
    found = {}
    for system, values in times.items():
        found[system] = {"min": min(values), "median": statistics.median(values)}
        print(
            f"{system:12} server CPU µs per append: min {min(values):6.1f}"
            f" median {statistics.median(values):6.1f}",
            flush=True,
        )
    for store in stores.values():
        store.close()
    world.filler.close()
    return found


def _pulled_up(sql: dict[str, str]) -> dict[str, str]:
    """The known checks' statements as before decision 0174 (the guard's subquery pulled up), renamed ``…~before``."""
    old = dict(sql)
    for name in [n for n in sql if n.startswith("known_check") and "@" in n and "/" not in n]:
        for suffix in ("", "/with", "/main"):
            old[f"{name}~before{suffix}"] = sql[f"{name}{suffix}"].replace(
                " AS ok OFFSET 0) AS g", " AS ok) AS g"
            )
    return old


def by_statements(url: str, blocks: int) -> dict[str, dict[str, float]]:
    """The guarded append's statements with the check as before 0174 and as now, rolled back, in turns."""
    from flowmem.core import prepare
    from flowmem.store.known import foresee
    from flowmem.store.postgres.facts import asked_of, known_statements
    from flowmem.store.postgres.pipeline import Pipeline
    from flowmem.store.postgres.queries import SQL
    from flowmem.store.postgres.store import advisory_key, held_lock
    from flowmem.store.rows import guard_form

    world = World(url)
    sql = _pulled_up(SQL)
    store = one_connection(url)
    address = world.buffer("guarded")
    store.append(address, prepare(_MESSAGES.turn(LENGTH), 1), guard=world.guard)
    known = store._known.get(address)  # noqa: SLF001 - the facts the appends are decided on
    assert known is not None
    found: dict[str, dict[str, float]] = {}
    for kind_of_message in (LENGTH + 1, LENGTH + 4):  # a call (ids checked), a user message
        rows = prepare(_MESSAGES.turn(kind_of_message), 1)
        ids, heals = asked_of(rows)
        foreseen = foresee(known, address, rows, ids, heals, 0, 0)
        kind, checks = guard_form(world.guard)
        lock, holds = held_lock(world.guard)
        head = (known.version, known.count, known.last_major, known.bytes)
        bid = known.buffer_id
        fresh = (bid, bid, bid, foreseen.fresh) if foreseen.fresh else ()
        check = ("known_check" if foreseen.fresh else "known_check_head") + f"@{kind}"
        forms = {
            form: known_statements(check + suffix, (bid, *head, *fresh, *checks), foreseen.writes)
            for form, suffix in (("before", "~before"), ("after", ""))
        }
        with store._connection() as conn:  # noqa: SLF001 - its backend, for its CPU
            pid = conn.info.backend_pid

            locking = (lock, (advisory_key(address), "1000ms", *holds))

            def send(
                statements: list[tuple[str, tuple[Any, ...]]],
                conn: Any = conn,
                locking: tuple[str, tuple[Any, ...]] = locking,
            ) -> None:
                with Pipeline(conn, sql) as db:
                    db.send("begin", ())
                    db.send(*locking)
                    held = db.send(*statements[0])
                    for statement in statements[1:]:
                        db.send(*statement)
                    db.send("rollback", ())
                    db.finish()
                    if db.result(held)[0] != (True, True):
                        raise RuntimeError("the verdict did not hold")

            times: dict[str, list[float]] = {"before": [], "after": []}
            for number in range(blocks):
                for form in ("before", "after") if number % 2 else ("after", "before"):
                    start = cpu_ns(pid)
                    for _ in range(BLOCK):
                        send(forms[form])
                    times[form].append((cpu_ns(pid) - start) / 1e3 / BLOCK)
        label = "call" if foreseen.fresh else "user"
        for form, values in times.items():
            found[f"{label} {form}"] = {"min": min(values), "median": statistics.median(values)}
            print(
                f"{label} {form:6} server CPU µs per statement set: min {min(values):6.1f}"
                f" median {statistics.median(values):6.1f}",
                flush=True,
            )
    store.close()
    world.filler.close()
    return found


def _before_store(url: str) -> Any:
    """A store appending on known facts with the guard's check as before decision 0174 (pulled up: read twice)."""
    from flowmem.store.known import Unforeseen, foresee
    from flowmem.store.postgres import PostgresStore
    from flowmem.store.postgres.after import known_after
    from flowmem.store.postgres.facts import asked_of, known_statements
    from flowmem.store.postgres.pipeline import Pipeline, roll_back
    from flowmem.store.postgres.queries import SQL
    from flowmem.store.postgres.store import advisory_key, held_lock
    from flowmem.store.rows import ensure_form, guard_form

    old = _pulled_up(SQL)

    class Before(PostgresStore):
        """``_known_append`` as it is, its check's statement named ``…~before``."""

        def _known_append(self, conn: Any, ask: Any, timeout: str) -> Any:
            address, guard = ask.address, ask.guard
            known = self._known.get(address)
            if known is None:
                return None
            ids, heals = asked_of(ask.rows)
            try:
                foreseen = foresee(
                    known, address, ask.rows, ids, heals, ask.max_messages, ask.max_bytes
                )
            except Unforeseen:
                return None
            try:
                kind, checks = guard_form(guard)
                check = "known_check" if foreseen.fresh else "known_check_head"
                check = f"{check}@{kind}~before" if kind else check
                lock, holds = held_lock(guard)
                ensure = ensure_form(guard)
                bid = known.buffer_id
                head = (known.version, known.count, known.last_major, known.bytes)
                fresh = (bid, bid, bid, foreseen.fresh) if foreseen.fresh else ()
                statements = known_statements(check, (bid, *head, *fresh, *checks), foreseen.writes)
                with Pipeline(conn, old) as db:
                    if ensure is not None:
                        db.send(*ensure)
                    db.send(lock, (advisory_key(address), timeout, *holds))
                    held = db.send(*statements[0])
                    for statement in statements[1:]:
                        db.send(*statement)
                    db.finish()
                    verdict = db.result(held)
                    if kind and not verdict[0][1]:
                        raise self._guard_error(conn, guard)
                    if verdict[0][0]:
                        self._known.remember(address, known_after(known, foreseen.writes))
                        return foreseen.outcome
                    self._known.remember(address, None)
            except BaseException:
                self._known.remember(address, None)
                roll_back(conn)
                raise
            return None

    return Before(f"{url}?pool_min=1&pool_max=1")


def by_forms(url: str, blocks: int) -> dict[str, dict[str, dict[str, float]]]:
    """Whole guarded appends, the check as before 0174 and as now, in turns: wall, client CPU, server CPU."""
    world = World(url)
    stores = {"before": _before_store(url), "after": one_connection(url)}
    appends = {form: world.appender(stores[form], "guarded") for form in stores}
    pids = {form: backend_pid(stores[form]) for form in stores}
    for form in stores:
        for _ in range(WARM):
            appends[form]()
    measured: dict[str, dict[str, list[float]]] = {
        form: {"wall_us": [], "client_cpu_us": [], "server_cpu_us": []} for form in stores
    }
    for number in range(blocks):
        for form in ("before", "after") if number % 2 else ("after", "before"):
            server, client, wall = cpu_ns(pids[form]), time.process_time(), time.perf_counter()
            for _ in range(BLOCK):
                appends[form]()
            measured[form]["wall_us"].append((time.perf_counter() - wall) / BLOCK * 1e6)
            measured[form]["client_cpu_us"].append((time.process_time() - client) / BLOCK * 1e6)
            measured[form]["server_cpu_us"].append((cpu_ns(pids[form]) - server) / BLOCK / 1e3)
    found: dict[str, dict[str, dict[str, float]]] = {}
    for form, values in measured.items():
        found[form] = {
            key: {"min": min(v), "median": statistics.median(v)} for key, v in values.items()
        }
        print(
            f"guarded {form:6} "
            + "  ".join(
                f"{key} min {min(v):6.1f} median {statistics.median(v):6.1f}"
                for key, v in values.items()
            ),
            flush=True,
        )
    for store in stores.values():
        store.close()
    world.filler.close()
    return found


def main() -> None:
    """Measure and print; the JSON last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callgrind", action="store_true", help="instructions, under valgrind")
    parser.add_argument("--appends", type=int, default=96)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument(
        "--first", action="store_true", help="with --callgrind: a fresh connection's first appends"
    )
    parser.add_argument("--repeats", type=int, default=2, help="backends per K with --first")
    parser.add_argument(
        "--guarded-fill",
        action="store_true",
        help="with --first: the guarded buffer filled guarded",
    )
    parser.add_argument(
        "--in-order", action="store_true", help="the bench's runs, each timed append in order"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs with --in-order")
    parser.add_argument("--durable", action="store_true", help="initdb's settings (CPU mode)")
    parser.add_argument("--statements", action="store_true", help="the check before/after 0174")
    parser.add_argument(
        "--forms", action="store_true", help="whole guarded appends, the check before/after 0174"
    )
    args = parser.parse_args()
    import flowmem

    results: dict[str, Any] = {"flowmem": flowmem.__file__, "load": os.getloadavg()[0]}
    if args.in_order:
        results["in_order"] = in_order(args.runs)
    elif args.callgrind:
        with callgrind_postgres() as (url, out):
            if args.first:
                results["first_appends"] = by_first(url, out, args.repeats, args.guarded_fill)
                results["guarded_fill"] = args.guarded_fill
            else:
                results["instructions"] = by_callgrind(url, out, args.appends)
    else:
        with pgserver.throwaway_postgres(args.durable) as (url, _):
            results["server_cpu_us"] = by_cpu(url, args.blocks)
            if args.statements:
                results["statements_cpu_us"] = by_statements(url, args.blocks)
            if args.forms:
                results["forms"] = by_forms(url, args.blocks)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
