"""An append on known facts with its check as a statement of its own against the check in its writes' statement (not a test).

Decision 0165. One throwaway non-durable server; two stores, one connection each, on
two buffers (four, guarded): one appends as before that decision (the lock, the check
``append_known…`` setting ``flowmem.known``, the writes reading the setting: three
statements), the other as ``PostgresStore`` does now (the lock, then the check and the
writes in one statement). Both fill their buffers to ``LENGTH`` rows, then append
bench/store.py's conversation (user, assistant calling a tool, the result, the answer)
in blocks of 40 appends, the two forms in turns (the order turned each round), so the
machine's load weighs on both alike. Per append, for each form: the backend's CPU
(``/proc/<pid>/schedstat``) and the client's (``process_time``); min and median of the
blocks (JSON on stdout's last line).

``--rolled-back``: the statements alone, on one connection and one state: a user message
and an assistant turn calling a tool, each foreseen once on a 100-row buffer, then sent
in blocks of 50 as ``BEGIN``, the lock, the check and the writes (both forms), ``ROLLBACK``
(nothing kept, the same header every time), the forms in turns; the backend's CPU per
append (the ``BEGIN`` and ``ROLLBACK`` in both).

    .venv/bin/python scripts/pg_known_statements.py [BLOCKS] [--rolled-back]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import pgserver

BLOCK, LENGTH = 40, 400


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far (ns)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _old_statements() -> dict[str, str]:
    """``SQL`` with the writes' variants before decision 0165 (reading ``flowmem.known``) as ``<name>?old``."""
    from flowmem.store.known import FORESEEABLE
    from flowmem.store.postgres.pipeline import WRITES
    from flowmem.store.postgres.queries import SQL

    setting = "current_setting('flowmem.known')::boolean"
    old = dict(SQL)
    for name in FORESEEABLE:  # the writes' variants reading the setting, under names of their own
        for suffix in ("", "/with", "/main"):
            if f"{name}?{suffix}" in SQL:
                old[f"{name}?old{suffix}"] = SQL[f"{name}?{suffix}"].replace(
                    "(SELECT v FROM known)", setting
                )
        WRITES[f"{name}?old"] = WRITES[f"{name}?"]
    return old


def _forms(conn: Any, old: dict[str, str], address: Any, known: Any, rows: Any) -> dict[str, Any]:
    """One append's statements in both forms, each in a transaction rolled back (``before``, ``after``)."""
    from flowmem.store.known import foresee
    from flowmem.store.postgres.facts import asked_of, known_statements
    from flowmem.store.postgres.pipeline import Pipeline
    from flowmem.store.postgres.queries import SQL
    from flowmem.store.postgres.store import advisory_key

    ids, heals = asked_of(rows)
    foreseen = foresee(known, address, rows, ids, heals, 0, 0)
    bid = known.buffer_id
    head = (known.version, known.count, known.last_major, known.bytes)
    fresh = (bid, bid, bid, foreseen.fresh) if foreseen.fresh else ()
    check = "append_known" if foreseen.fresh else "append_known_head"
    statements = known_statements(
        f"known_check{check.removeprefix('append_known')}", (bid, *head, *fresh), foreseen.writes
    )
    lock = ("timed_lock", (advisory_key(address), "1000ms"))

    def before() -> None:
        with Pipeline(conn, old) as db:
            db.send("begin", ())
            db.send(*lock)
            held = db.send(check, (bid, *head, *fresh))
            for name, params in foreseen.writes:
                db.run(f"{name}?old", params)
            db.send("rollback", ())
            db.finish()
            assert db.result(held)[0][0] is True

    def after() -> None:
        with Pipeline(conn, SQL) as db:
            db.send("begin", ())
            db.send(*lock)
            held = db.send(*statements[0])
            for statement in statements[1:]:
                db.send(*statement)
            db.send("rollback", ())
            db.finish()
            assert db.result(held)[0][0] is True

    return {"before": before, "after": after}


def rolled_back(blocks: int) -> None:
    """The two forms' statements, rolled back, in turns on one connection (see the module)."""
    from flowmem.core import prepare
    from flowmem.store import Address
    from flowmem.store.postgres import PostgresStore

    old = _old_statements()
    call = {
        "id": "call_" + "x" * 24,
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    messages = {
        "user": {"role": "user", "content": "hello there"},
        "call": {"role": "assistant", "content": "", "tool_calls": [call]},
    }
    found: dict[str, dict[str, float]] = {}
    with pgserver.throwaway_postgres(False) as (url, _):
        store = PostgresStore(f"{url}?pool_min=1&pool_max=1")
        address = Address("global", "", "rolled")
        for n in range(100):
            store.append(address, prepare({"role": "user", "content": f"q{n}"}, 1))
        known = store._known.get(address)  # noqa: SLF001 - the facts the appends are decided on
        assert known is not None
        for kind, message in messages.items():
            with store._connection() as conn:  # noqa: SLF001 - its backend, for its CPU
                pid = conn.info.backend_pid
                forms = _forms(conn, old, address, known, prepare(message, 1))
                times: dict[str, list[float]] = {"before": [], "after": []}
                for round_ in range(blocks):
                    for form in ("before", "after") if round_ % 2 else ("after", "before"):
                        start = cpu_ns(pid)
                        for _ in range(50):
                            forms[form]()
                        times[form].append((cpu_ns(pid) - start) / 1e3 / 50)
            for form, values in times.items():
                found[f"{kind} {form}"] = {"min": min(values), "median": statistics.median(values)}
                print(
                    f"{kind:5} {form:7} server CPU µs/append min {min(values):6.1f} median {statistics.median(values):6.1f}"
                )
        store.close()
    print(json.dumps(found))


def _before(store_type: Any) -> Any:
    """A ``PostgresStore`` appending on known facts as before decision 0165 (three statements)."""
    from flowmem.store.known import Unforeseen, foresee
    from flowmem.store.postgres.after import known_after
    from flowmem.store.postgres.facts import asked_of
    from flowmem.store.postgres.pipeline import Pipeline
    from flowmem.store.postgres.store import advisory_key, held_lock
    from flowmem.store.rows import guard_form

    old = _old_statements()

    class Before(store_type):  # type: ignore[misc, valid-type]
        def _known_append(self, conn: Any, ask: Any, timeout: str) -> Any:
            known = self._known.get(ask.address)
            if known is None:
                return None
            ids, heals = asked_of(ask.rows)
            try:
                foreseen = foresee(
                    known, ask.address, ask.rows, ids, heals, ask.max_messages, ask.max_bytes
                )
            except Unforeseen:
                return None
            kind, checks = guard_form(ask.guard)
            check = "append_known" if foreseen.fresh else "append_known_head"
            check = f"{check}@{kind}" if kind else check
            lock, holds = held_lock(ask.guard)
            bid = known.buffer_id
            head = (known.version, known.count, known.last_major, known.bytes)
            fresh = (bid, bid, bid, foreseen.fresh) if foreseen.fresh else ()
            with Pipeline(conn, old) as db:
                db.send(lock, (advisory_key(ask.address), timeout, *holds))
                held = db.send(check, (bid, *head, *fresh, *checks))
                for name, params in foreseen.writes:
                    db.run(f"{name}?old", params)
                db.finish()
                verdict = db.result(held)
            if not verdict[0][0]:
                raise RuntimeError(
                    f"a stale fact in a bench with one writer: {check} {verdict} {foreseen.writes}"
                )
            self._known.remember(ask.address, known_after(known, foreseen.writes))
            return foreseen.outcome

    return Before


def main() -> None:
    """Time both forms in turns; print µs per append."""
    from flowmem.auth import create_token
    from flowmem.core import prepare
    from flowmem.store import Address
    from flowmem.store.base import SessionRecord, WriteGuard
    from flowmem.store.postgres import PostgresStore

    blocks = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 30
    if "--rolled-back" in sys.argv:
        rolled_back(blocks)
        return

    def message(n: int) -> dict[str, Any]:
        """The n-th message of the conversation (a call id of its own per turn)."""
        cid, kind = f"call_{n // 4:024d}", n % 4
        if kind == 0:
            return {"role": "user", "content": f"what is the weather in city {n}?"}
        if kind == 1:
            call = {
                "id": cid,
                "type": "function",
                "function": {"name": "weather", "arguments": "{}"},
            }
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        if kind == 2:
            return {"role": "tool", "tool_call_id": cid, "content": "sunny, 21 degrees"}
        return {"role": "assistant", "content": f"It is sunny in city {n}."}

    times: dict[str, dict[str, list[float]]] = {}
    with pgserver.throwaway_postgres(False) as (url, _):
        url = f"{url}?pool_min=1&pool_max=1"
        stores = {"before": _before(PostgresStore)(url), "after": PostgresStore(url)}
        runs: list[tuple[str, Any, Address, WriteGuard | None]] = []
        for form, store in stores.items():
            session = f"s-{form}"
            store.create_session(SessionRecord(session, session, "u1"))
            _, token = create_token(store, "u1")
            runs.append((f"{form} plain", store, Address("global", "", f"b-{form}"), None))
            runs.append(
                (
                    f"{form} guarded",
                    store,
                    Address("session", session, "b"),
                    WriteGuard(token.id, session),
                )
            )
        sent = [0] * len(runs)

        def append(index: int, count: int) -> None:
            _, store, address, guard = runs[index]
            for _ in range(count):
                store.append(address, prepare(message(sent[index]), 1), guard=guard)
                sent[index] += 1

        for index in range(len(runs)):
            append(index, LENGTH)
        pids = {}
        for form, store in stores.items():
            with store._connection() as conn:  # noqa: SLF001 - its backend, for its CPU
                pids[form] = conn.info.backend_pid
        for name, *_ in runs:
            times[name] = {"server": [], "client": []}
        for round_ in range(blocks):
            order = list(range(len(runs)))
            if round_ % 2:
                order.reverse()
            for index in order:
                name = runs[index][0]
                pid = pids[name.split()[0]]
                server, client = cpu_ns(pid), time.process_time()
                append(index, BLOCK)
                times[name]["client"].append((time.process_time() - client) * 1e6 / BLOCK)
                times[name]["server"].append((cpu_ns(pid) - server) / 1e3 / BLOCK)
        for store in stores.values():
            store.close()
    found = {
        name: {
            side: {"min": min(v), "median": statistics.median(v)} for side, v in measured.items()
        }
        for name, measured in times.items()
    }
    for name, measured in found.items():
        print(
            f"{name:16} server CPU µs/append min {measured['server']['min']:6.1f} median {measured['server']['median']:6.1f}"
            f"   client min {measured['client']['min']:6.1f} median {measured['client']['median']:6.1f}"
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main()
