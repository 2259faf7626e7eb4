"""The kill matrix as a markdown table: every program × point × backend, and its control.

    .venv/bin/python -m tests.integrations.kill.report [--rounds N] [--postgres URL] [--programs a,b]

Runs ``harness.play`` for every program of ``harness.PROGRAMS`` whose module imports
(the others are listed as skipped, with the reason), at every point: on SQLite (a fresh
file per program), on PostgreSQL when ``--postgres`` names a server (a fresh schema for
the run, dropped after it, as ``postgres_db_url`` makes one per test), and on the
program's own store, the control, when it has one. ``--programs`` takes names of
``PROGRAMS`` or dotted module paths (``tests.integrations.kill.toy_program``). The last
line counts the failed rounds of the flowmem rows; the exit status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tests.integrations.kill.harness import (
    CONTROL,
    FLOWMEM,
    PROGRAMS,
    ROUNDS,
    Verdict,
    _module,
    play,
    preload_only,
)
from tests.integrations.kill.points import POINTS, TOOL_STARTED

SQLITE = "sqlite"
POSTGRES = "postgres"


@dataclass(frozen=True)
class Row:
    """One line of the table: a program at a point on a backend, and its rounds' verdicts."""

    program: str
    point: str
    backend: str
    verdicts: tuple[Verdict, ...]

    def count(self, what: Callable[[Verdict], bool]) -> str:
        """How many rounds showed ``what``, as ``n/rounds``."""
        return f"{sum(map(what, self.verdicts))}/{len(self.verdicts)}"

    @property
    def failed(self) -> int:
        """The rounds that broke a promise."""
        return sum(not v.passed for v in self.verdicts)

    def markdown(self) -> str:
        """The row as a markdown table line."""
        cells = [
            self.program,
            self.point,
            self.backend,
            str(len(self.verdicts)),
            self.count(lambda v: v.killed),
            self.count(lambda v: v.question_kept),
            self.count(lambda v: v.call_kept) + ("" if self.point in TOOL_STARTED else " (n/a)"),
            self.count(lambda v: v.healed),
            self.count(lambda v: v.accepted),
            self.count(lambda v: v.once),
            self.count(lambda v: v.passed),
        ]
        return "| " + " | ".join(cells) + " |"


HEADER = (
    "| program | point | backend | rounds | killed | question kept | call kept | call answered "
    "| accepted | once | passed |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def programs_of(names: str | None) -> list[str]:
    """The programs to run: every one of ``PROGRAMS``, or the comma-separated names given."""
    if not names:
        return list(PROGRAMS)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if "." not in n and n not in PROGRAMS]
    if unknown:
        raise SystemExit(
            f"unknown program(s) {', '.join(unknown)}: one of {', '.join(PROGRAMS)}, "
            "or a dotted module path"
        )
    return chosen


def load(program: str) -> tuple[object | None, str]:
    """A program's module, or None and why it does not import."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _module(program), ""
    except Exception as exc:  # a missing module or extra: skipped with the reason
        return None, f"{type(exc).__name__}: {exc}"


def why(verdict: Verdict) -> str:
    """What a failed round broke, in words."""
    broken = [
        what
        for what, kept in (
            ("not killed", verdict.killed),
            ("question lost", verdict.question_kept),
            ("call lost", verdict.call_kept or verdict.point not in TOOL_STARTED),
            ("a request refused", verdict.accepted),
            ("stored twice", verdict.once),
            ("second turn unanswered", verdict.answered),
        )
        if not kept
    ]
    if verdict.problem:
        broken.append(verdict.problem)
    return "; ".join(broken)[:400]


@contextmanager
def postgres_schema(server: str | None) -> Iterator[str | None]:
    """A fresh schema of ``server`` for this run (None without a server)."""
    if server is None:
        yield None
        return
    from tests.conftest import fresh_schema

    with fresh_schema(server) as url:
        yield url


def run(
    programs: Sequence[str],
    rounds: int,
    postgres: str | None,
    out: TextIO,
) -> int:
    """Play the matrix, print its table to ``out``; return the failed rounds of the flowmem rows."""
    rows: list[Row] = []
    notes: list[str] = []
    print(HEADER, file=out, flush=True)  # each row as soon as its rounds are played
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kill-report-")))
        pg_url = stack.enter_context(postgres_schema(postgres))
        for program in programs:
            module, why = load(program)
            if module is None:
                notes.append(f"- `{program}` skipped: {why}")
                continue
            name = program.rsplit(".", 1)[-1]
            places = {SQLITE: f"sqlite:///{scratch}/{name}.db"}
            if pg_url is not None:
                places[POSTGRES] = pg_url
            control = getattr(module, "CONTROL_STORE", None)
            if control is None:
                notes.append(
                    f"- `{program}`: no control (the framework has no store of its own to compare)"
                )
            else:
                notes.append(f"- `{program}`: control = {control}")
            for point in POINTS:
                for backend, place in places.items():
                    verdicts = play(program, point, FLOWMEM, place, scratch, rounds=rounds)
                    rows.append(Row(name, point, backend, tuple(verdicts)))
                    print(rows[-1].markdown(), file=out, flush=True)
                if control is not None:
                    directory = scratch / f"{name}-control"
                    directory.mkdir(exist_ok=True)
                    verdicts = play(program, point, CONTROL, str(directory), scratch, rounds=rounds)
                    rows.append(Row(name, point, CONTROL, tuple(verdicts)))
                    print(rows[-1].markdown(), file=out, flush=True)
    print(file=out)
    for note in notes:
        print(note, file=out)
    print(
        "- call kept is required only where the tool had started (from `tool_start` on); "
        "`(n/a)` marks the points before it",
        file=out,
    )
    problems = [
        f"- {v.program} {v.point} ({row.backend}): {why(v)}"
        for row in rows
        if row.backend != CONTROL
        for v in row.verdicts
        if not v.passed
    ]
    if problems:
        print("\nFailed flowmem rounds:", file=out)
        for problem in problems:
            print(problem, file=out)
    flowmem_rows = [row for row in rows if row.backend != CONTROL]
    failed = sum(row.failed for row in flowmem_rows)
    total = sum(len(row.verdicts) for row in flowmem_rows)
    print(f"\n**flowmem rows: {failed} failed rounds of {total}**", file=out)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse, run, exit 1 when a flowmem round failed."""
    parser = argparse.ArgumentParser(prog="python -m tests.integrations.kill.report")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per point and backend")
    parser.add_argument(
        "--postgres", metavar="URL", help="a PostgreSQL server (a fresh schema per run)"
    )
    parser.add_argument(
        "--programs", help="comma-separated names of PROGRAMS or dotted module paths"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    programs = programs_of(args.programs)
    preload_only(programs)  # the fork server imports the frameworks of these programs alone
    sys.stdout.flush()
    table = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    # what the programs themselves print (their children inherit fd 1) goes to stderr,
    # so the table on stdout stays a table
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with table:
        failed = run(programs, args.rounds, args.postgres, table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
