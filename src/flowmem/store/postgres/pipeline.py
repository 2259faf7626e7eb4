"""The append's libpq pipeline: the one module of flowmem that uses psycopg's internals.

``psycopg.generators``, ``psycopg.pq``, the ``Transformer`` and the ``PGconn``'s
private ``_encoding``: what psycopg's own cursors use, not its documented API.
pyproject.toml bounds psycopg's version for this module, and
tests/store/test_psycopg_internals.py fails when an installed psycopg changes
what it relies on.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Sequence, Set
from typing import Any, ClassVar, TypeVar

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.abc import PQGen
from psycopg.abc import Transformer as AbcTransformer
from psycopg.adapt import PyFormat, Transformer
from psycopg.generators import fetch_many, send
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn, PGresult

from flowmem.errors import StoreError
from flowmem.store.known import FORESEEABLE

log = logging.getLogger("flowmem")


class Pipeline:
    """The append's statements at the libpq level, in pipeline mode (docs/decisions/0028).

    psycopg's cursors spend client CPU on each statement (a cursor, a query
    conversion and a socket wait; decision 0059 has the numbers); here a
    statement is one libpq call queued without waiting (``run``), and the client
    waits once per round trip:
    when a question needs its answer (``one``/``all``: everything queued before
    it is sent along) and at the end (``finish``: a Sync). The statements are
    prepared under their own names once per connection. A ``SqlRunner`` for the
    editor.
    """

    writes: ClassVar[dict[str, tuple[frozenset[str], frozenset[str]]]]
    """The writes ``run`` holds and merges, with the tables each reads and writes: ``WRITES``
    (set below; a pipeline of other statements adds its own, decision 0201)."""

    def __init__(self, conn: psycopg.Connection[Any], sql: dict[str, str]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.sql = sql
        self.prepared = prepared_of(conn)
        if self.prepared.tx is None:
            self.prepared.tx = Transformer(conn)
        # one per connection: a Transformer caches the dumpers and loaders it has looked
        # up, and a new one per append looked them up again (decisions 0033 and 0059)
        self.tx: AbcTransformer = self.prepared.tx
        self.sent = 0  # commands queued
        self.fetched: list[list[PGresult]] = []  # the results of the first len(fetched)
        self.checked = 0  # how many of them ``_raise_first`` found without an error
        self.preparing: dict[int, bytes] = {}  # ticket of a Parse -> its name, until answered
        self.wrote = False  # a statement that may write was sent
        self.held: list[str] = []  # writes not sent yet (see ``run``), their parameters
        self.held_params: list[Any] = []
        self.held_reads: set[str] = set()  # the tables they read and write
        self.held_writes: set[str] = set()

    def __enter__(self) -> Pipeline:
        self.pgconn.enter_pipeline_mode()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            return
        # end the transaction unwritten (the held writes are dropped, what was sent
        # is rolled back), read what is in flight and leave pipeline mode
        try:
            if self.pgconn.pipeline_status != pq.PipelineStatus.OFF:
                if self.wrote:
                    # in the implicit transaction ROLLBACK aborts it (the server logs
                    # a WARNING that no transaction block is open); in an aborted one
                    # it is skipped. Before any write the Sync may commit: the lock and
                    # the reads change nothing (and log nothing).
                    self.pgconn.send_query_params(b"ROLLBACK", None)
                    self.sent += 1
                self.pgconn.pipeline_sync()
                self.fetched += self.conn.wait(_fetch(self.pgconn, self._pending(), sync=True))
                self.pgconn.exit_pipeline_mode()
                self._settle()
        except psycopg.Error:
            log.debug("leaving pipeline mode after an error failed", exc_info=True)

    def send(self, name: str, params: Sequence[Any]) -> int:
        """Queue the named statement (after the held writes); return its ticket (no waiting)."""
        if self.held:
            self._release()
        return self._send(name, params)

    def _send(self, name: str, params: Sequence[Any]) -> int:
        found = self.prepared.statements.get(name)
        if found is None:
            found = self.prepared.statement(name, self.sql)
        key, text, writes = found
        if writes:
            self.wrote = True
        count = len(params)
        formats = _TEXT[:count] if count <= len(_TEXT) else [PyFormat.TEXT] * count
        values = self.tx.dump_sequence(params, formats) if count else None
        if key not in self.prepared.names and key not in self.preparing.values():
            self.pgconn.send_prepare(key, text)
            self.preparing[self.sent] = key
            self.sent += 1
        self.pgconn.send_query_prepared(key, values)
        self.sent += 1
        return self.sent - 1

    def result(self, ticket: int) -> list[tuple[Any, ...]]:
        """The rows of a queued statement: one round trip for it and all queued before."""
        return _rows(self.tx, self._answer(ticket))

    def has_rows(self, ticket: int) -> bool:
        """Whether a queued statement returned a row (not loading it)."""
        return self._answer(ticket).ntuples > 0

    def _answer(self, ticket: int) -> PGresult:
        if ticket >= len(self.fetched):
            self.pgconn.send_flush_request()
            self.fetched += self.conn.wait(_fetch(self.pgconn, self.sent - len(self.fetched)))
            if self.preparing:
                self._settle()
            self._raise_first()
        return self.fetched[ticket][-1]

    def finish(self) -> None:
        """Send the rest with a Sync and wait for every answer; the first error raises."""
        if self.held:
            self._release()
        pgconn = self.pgconn
        pgconn.pipeline_sync()
        self.fetched += self.conn.wait(_fetch(pgconn, self.sent - len(self.fetched), sync=True))
        pgconn.exit_pipeline_mode()
        if self.preparing:
            self._settle()
        self._raise_first()

    def _pending(self) -> int:
        return self.sent - len(self.fetched)

    def _settle(self) -> None:
        """Record the statements whose Parse the server answered (a failed one is not kept)."""
        if not self.preparing:
            return
        for ticket in [t for t in self.preparing if t < len(self.fetched)]:
            key = self.preparing.pop(ticket)
            if self.fetched[ticket][-1].status == _COMMAND_OK:
                self.prepared.names.add(key)

    def _raise_first(self) -> None:
        """Raise the first error among the results not checked yet (as psycopg would)."""
        for results in self.fetched[self.checked :]:
            for res in results:
                status = res.status
                if status == _FATAL_ERROR:
                    error = psycopg.errors.error_from_result(res, encoding=self.pgconn._encoding)
                    if isinstance(error, psycopg.errors.InvalidSqlStatementName):
                        self.prepared.forget()
                        self.conn.__dict__.pop(QUOTAS, None)  # DISCARD ALL reset them too
                    raise error
                if status == _PIPELINE_ABORTED:
                    raise psycopg.errors.PipelineAborted("pipeline aborted")
        self.checked = len(self.fetched)

    # --- SqlRunner ---------------------------------------------------------------------
    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a named statement; return its first row."""
        found = self.result(self.send(name, params))
        return found[0] if found else None

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a named statement; return every row."""
        return self.result(self.send(name, params))

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Queue a named write (its error raises by ``finish``).

        Writes are held and sent as one statement (``WITH`` sub-statements, see
        ``WRITES``) while each touches no table an earlier held one writes and
        writes none an earlier one reads: then running them together, on one
        snapshot, is running them in order. Any other statement sends them first.
        """
        touched = self.writes.get(name)
        if touched is None:
            self.send(name, params)
            return
        if splits(touched, self.held_reads, self.held_writes):
            self._release()
        self.held.append(name)
        self.held_params.extend(params)
        self.held_reads |= touched[0]
        self.held_writes |= touched[1]

    def _release(self) -> None:
        """Send the held writes, as one statement."""
        if self.held:
            self._send("+".join(self.held), self.held_params)
            self.held, self.held_params = [], []
            self.held_reads, self.held_writes = set(), set()


def splits(
    touched: tuple[frozenset[str], frozenset[str]], held_reads: Set[str], held_writes: Set[str]
) -> bool:
    """Whether a write (``touched``: the tables it reads and writes) starts a statement of its own.

    It does when it touches a table the held writes write, or writes one they read:
    ``Pipeline.run``'s rule, and ``facts.known_statements``' (decision 0165).
    """
    reads, writes = touched
    return bool((reads | writes) & held_writes or writes & held_reads)


# The editor's writes the pipeline may send together (``Pipeline.run``): the tables
# each reads and writes. ``call_insert`` reads ``buffer_calls`` too (its ON CONFLICT).
# Not here (always sent alone): the shifts and unflips of a healing insert. The repair log's
# entries go in the header's update (``header_logged``: their bytes, decision 0135, and the
# entries themselves, decision 0148; a trigger of it moves them to ``buffer_repairs``).
# Since migration 35 (decision 0194) an answer is its row of ``buffer_rows`` (found by the
# rows' answers' key) and carries its declaration there; ``buffer_call_ids`` holds declarations
# of their own only. ``call_insert`` reads the answers (its ``answered``), ``calls_delete`` clears
# the carried declarations of a row's calls from their answers' rows.
_ROWS, _CALLS, _HEADER = "buffer_rows", "buffer_call_ids", "buffers"
_ANSWERS = _ROWS
WRITES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    name: (frozenset(reads), frozenset(writes))
    for name, reads, writes in (
        ("row_insert", (), (_ROWS,)),
        ("row_update", (_ROWS,), (_ROWS,)),
        ("row_delete", (_ROWS,), (_ROWS,)),
        ("call_insert", (_ANSWERS, _CALLS), (_CALLS,)),
        ("calls_delete", (_CALLS, _ROWS), (_CALLS, _ROWS)),  # the row's call ids (decision 0139)
        ("calls_of_drop", (_CALLS,), (_CALLS,)),
        ("header_update", (_HEADER,), (_HEADER,)),
        ("header_listed", (_HEADER,), (_HEADER,)),  # with its list of open calls (decision 0153)
        ("header_logged", (_HEADER,), (_HEADER,)),
        ("header_listed_logged", (_HEADER,), (_HEADER,)),
    )
}
# (SQLite's ``answer_insert`` and ``answer_carry`` are foreseeable too; PostgreSQL sends neither
# since migration 35, decision 0194: an answer is its row)
WRITES.update({f"{name}?": WRITES[name] for name in FORESEEABLE if name in WRITES})
Pipeline.writes = WRITES


def _merged(name: str, sql: dict[str, str]) -> str:
    """The statement running held writes ``a+b+c`` together: ``WITH`` for all but the last.

    Its parameters numbered (``$1``…): each part's in turn (``_part``).
    """
    *first, last = [name] if name in sql else name.split("+")  # a name may hold a + itself
    ctes: list[str] = []
    taken = 0  # the parameters of the parts before
    for n, part in enumerate(first):
        own, text, taken = _part(part, sql, taken)
        ctes += [*own, f"w{n} AS ({text})"]
    own, text, _ = _part(last, sql, taken)
    ctes += own
    return f"WITH {', '.join(ctes)} {text}" if ctes else text


def _part(part: str, sql: dict[str, str], taken: int) -> tuple[list[str], str, int]:
    """A part's own ``WITH`` list, the rest, numbered after ``taken`` parameters, and the count so far.

    A part with a list of its own (``sql[part + "/with"]``, the rest ``sql[part +
    "/main"]``; ``sql[part]`` is the whole for other runners) has it lifted to the
    merged statement's top: a WITH holding an update cannot be nested in a
    sub-statement (decision 0164). A part's parameters are its ``%s`` in order or,
    where it has none, ``%1``…``%N``: each used as often as the statement needs.
    """
    own = sql.get(f"{part}/with")
    text = sql[part] if own is None else sql[f"{part}/main"]
    pieces = [own, text] if own is not None else [text]
    whole = " ".join(pieces)
    if "%s" in whole:
        count = whole.count("%s")
        numbers = iter(range(taken + 1, taken + count + 1))
        pieces = [
            "".join(f"${next(numbers)}{rest}" if n else rest for n, rest in enumerate(p.split("%s")))
            for p in pieces
        ]
    else:
        count = max((int(found) for found in _REFERENCE.findall(whole)), default=0)
        pieces = [_REFERENCE.sub(lambda m: f"${taken + int(m.group(1))}", p) for p in pieces]
    *own_list, rest = pieces
    return own_list, rest, taken + count


_REFERENCE = re.compile(r"%([1-9][0-9]*)")


class Prepared:
    """The append's statements prepared on one connection (names carry a generation).

    Also the connection's ``Transformer`` for the append's parameters and rows.
    """

    def __init__(self) -> None:
        self.generation = 0
        self.names: set[bytes] = set()
        self.tx: AbcTransformer | None = None
        # statement -> (prepared name, numbered text, may write), this generation
        self.statements: dict[str, tuple[bytes, bytes, bool]] = {}

    def statement(self, name: str, sql: dict[str, str]) -> tuple[bytes, bytes, bool]:
        """A statement's prepared name, its text for libpq and whether it may write, cached.

        Every statement but the lock and the facts query may write (``header_insert``
        may: it is sent like a write).
        """
        text = _numbered(name, _merged(name, sql))
        writes = not name.startswith(("timed_lock", "append_facts", "append_known", "buffer_known"))
        found = self.statements[name] = (self.name(name), text, writes)
        return found

    def name(self, statement: str) -> bytes:
        """The prepared name of a statement in the current generation.

        A number per statement, not its name: the server keeps 63 bytes of a
        prepared statement's name, and merged names (``a+b+c``) grow past that.
        """
        number = _NUMBERS.get(statement)
        if number is None:  # next() on a count is atomic: two threads never share a number
            number = _NUMBERS.setdefault(statement, next(_COUNT))
        return f"flowmem{self.generation}_{number}".encode()

    def forget(self) -> None:
        """The server lost some (``DISCARD ALL``, ``DEALLOCATE``): prepare anew, under new names."""
        self.generation += 1
        self.names.clear()
        self.statements.clear()


_TEXT = [PyFormat.TEXT] * 64  # parameter formats (a slice of it per statement)
_COMMAND_OK, _FATAL_ERROR = pq.ExecStatus.COMMAND_OK, pq.ExecStatus.FATAL_ERROR
_PIPELINE_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_STATE = "_flowmem_prepared"  # the attribute of a connection holding its ``Prepared``
QUOTAS = "_flowmem_quotas"  # the attribute of a connection holding the quotas it was given


def prepared_of(conn: psycopg.Connection[Any]) -> Prepared:
    """The append's state of one connection, kept on the connection: it goes with it.

    Not a weak-keyed table: its ``Transformer`` refers to the connection, so an
    entry would keep its own key alive.
    """
    found: Prepared | None = conn.__dict__.get(_STATE)
    if found is None:
        found = conn.__dict__.setdefault(_STATE, Prepared())
    return found


def in_transaction(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` is inside a transaction (an open one or one an error aborted)."""
    return conn.info.transaction_status != TransactionStatus.IDLE


def is_idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` works and is in no transaction (libpq's own status: no ``ConnectionInfo`` made)."""
    return conn.pgconn.transaction_status == _IDLE


_IDLE = TransactionStatus.IDLE


def roll_back(conn: psycopg.Connection[Any]) -> None:
    """End the transaction a failed write left ``conn`` in, if it left one (open or aborted)."""
    if in_transaction(conn):
        conn.execute("ROLLBACK")


T = TypeVar("T")


def prepared_again(run: Callable[[], T]) -> T:
    """Run ``run``, and once more when the server had forgotten the pipeline's statements.

    The server forgets them on ``DISCARD ALL`` or ``DEALLOCATE ALL``, and psycopg
    sends ``DEALLOCATE ALL`` itself when a connection that auto-prepared its own
    queries rolls back. The statement that found its name gone aborted the
    pipeline's one transaction, so nothing of the first run committed, and
    ``Prepared.forget`` named the statements anew: the second run prepares them.
    ``run`` must hold the connection across both runs (call this inside its loan).
    """
    try:
        return run()
    except psycopg.errors.InvalidSqlStatementName:
        return run()


class GuardFailed(Exception):
    """A write's guard did not hold: nothing was written; its error is found after the rollback."""


_NUMBERED: dict[str, bytes] = {}
_NUMBERS: dict[str, int] = {}  # statement -> its number in prepared names (this process)
_COUNT = itertools.count()


def _numbered(name: str, text: str) -> bytes:
    """A statement's text with ``%s`` numbered ``$1, $2…`` (what libpq takes), cached."""
    found = _NUMBERED.get(name)
    if found is None:
        parts = text.split("%s")
        if any("%" in part for part in parts):
            raise StoreError(f"statement {name} has a % other than %s")
        numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
        found = _NUMBERED[name] = numbered.encode()
    return found


def _fetch(pgconn: PGconn, count: int, sync: bool = False) -> PQGen[list[list[PGresult]]]:
    """Send what is queued, then read the results of ``count`` commands (and the Sync)."""
    yield from send(pgconn)
    out = []
    for _ in range(count):
        out.append((yield from fetch_many(pgconn)))
    if sync:  # the commit happens at the Sync: its error comes before the Sync's result
        late: list[PGresult] = []
        while True:
            done = yield from fetch_many(pgconn)
            if done and done[0].status == pq.ExecStatus.PIPELINE_SYNC:
                break
            late += done
        if late:
            out.append(late)
    return out


def _rows(tx: AbcTransformer, res: PGresult) -> list[tuple[Any, ...]]:
    """The rows of a statement's result, loaded like psycopg's cursors load them."""
    if res.status != pq.ExecStatus.TUPLES_OK or not res.ntuples:
        return []
    tx.set_pgresult(res)
    rows: list[tuple[Any, ...]] = tx.load_rows(0, res.ntuples, tuple)
    return rows
