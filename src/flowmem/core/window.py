"""Token-budget windows: the longest sendable suffix of a buffer that fits a budget.

A window keeps the newest rows of a buffer whose tokens fit in ``budget`` and that a
provider accepts as a history of their own:

- it never starts on a tool result, and never keeps a result without the turn that
  declared its call, so a call and all its results (parallel calls included) are
  kept or cut together;
- a row is the unit of a turn: the reasoning or thinking parts an assistant turn
  carries are kept or cut with it, never apart;
- with ``keep_system`` every system row is kept and counted wherever it stood, else
  system rows are ordinary rows of the suffix;
- with ``first_role`` the first non-system row of the window has that role
  (Anthropic's history starts on a user turn).

The scan reads the buffer from its end, so a caller holding only the newest rows
feeds them in batches and stops when :attr:`WindowScan.done` says so: the rows read
are the kept ones and at most one more turn. A row's position is any integer that
grows with its place in the buffer (an index, or a store's cursor); the rows are fed
with falling positions, and every row between two fed ones is fed.

Cost is monotone: moving the start one row earlier never lowers it (the system rows
are counted wherever they stand), so the longest fitting suffix is the earliest
valid start before the budget is first exceeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from flowmem.core.messages import call_ids, result_id
from flowmem.errors import WindowTooSmallError


class RowFacts(NamedTuple):
    """What the window rules need of one stored row: role, ids, tokens."""

    role: str
    tokens: int
    calls: tuple[str, ...] = ()
    answers: str | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """A window over a buffer of ``total`` rows: the rows kept, and what was cut.

    ``start`` is the index (0-based, in the buffer) of the first row of the suffix
    (``total`` when the suffix is empty); ``kept`` the positions kept as fed, in
    buffer order (the system rows before the suffix first when they are kept).
    ``cut_tokens`` is None when the buffer's total tokens were not given.
    """

    start: int
    kept: tuple[int, ...]
    tokens: int
    cut_messages: int
    cut_tokens: int | None
    total: int


class RowScan:
    """The window rules' state over rows fed newest first, and their loop: ``WindowScan``'s and ``CutScan``'s."""

    remembers: ClassVar[bool] = False
    """Whether every position fed and its tokens are kept (``WindowScan``: it lists the window's rows)."""

    def __init__(
        self,
        budget: int,
        systems: Mapping[int, int] | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
    ) -> None:
        """Scan for ``budget`` tokens; ``systems``: every system row's position and tokens."""
        self.budget = budget
        self.keep_system = keep_system
        self.first_role = first_role
        self._systems = dict(systems or {}) if keep_system else {}
        self.cost = sum(self._systems.values())
        self._remembered: dict[int, int] | None = {} if self.remembers else None  # CutScan keeps no row
        self._pending: set[str] = set()
        self._first_role: str | None = None  # the role of the earliest non-system row fed
        self._best: int | None = None
        self._best_cost = 0  # the cost when the best start was found: the window's tokens
        self._best_fed = 0  # the rows fed when it was found: the suffix's length
        self._fed = 0
        self._needed: int | None = None  # the cost of the smallest valid window
        self._next: int | None = None
        self.done = False

    def feed_rows(self, rows: Iterable[tuple[int, RowFacts]]) -> None:
        """Take each ``(position, row)`` in turn, newest first, until ``done``: the window rules in one loop.

        A speed twin of calling ``WindowScan.feed`` per row (a window's hot path holds the
        scan's state in locals). Oracle: ``tests/core/test_window.py``'s property that both
        end in the same window, ``tests/core/test_window_cut.py`` (``CutScan``, the same
        window on every history), and the service's windows checked against ``fit``.
        """
        if self.done:
            return
        budget, keep, wanted, pending, tokens = self.budget, self.keep_system, self.first_role, self._pending, self._remembered
        cost, best, needed, nxt, first = self.cost, self._best, self._needed, self._next, self._first_role
        fed, best_cost, best_fed = self._fed, self._best_cost, self._best_fed
        try:
            for position, (role, count, calls, answers) in rows:
                if nxt is not None and position > nxt:
                    raise ValueError(f"rows are fed newest first: expected a position below {nxt + 1}")
                nxt = position - 1
                fed += 1
                if tokens is not None:
                    tokens[position] = count
                kept_system = keep and role == "system"
                if not kept_system:
                    cost += count
                if answers is not None:
                    pending.add(answers)
                if calls:
                    pending.difference_update(calls)
                if role != "system":
                    first = role
                if (
                    not pending
                    and role != "tool"
                    and not kept_system
                    and (wanted is None or first in (None, wanted))
                ):
                    if needed is None:
                        needed = cost
                    if cost <= budget:
                        best, best_cost, best_fed = position, cost, fed
                if cost > budget and needed is not None:
                    self.done = True  # every earlier start costs at least as much
                    break
        finally:
            self.cost, self._best, self._needed, self._next, self._first_role = cost, best, needed, nxt, first
            self._fed, self._best_cost, self._best_fed = fed, best_cost, best_fed


class WindowScan(RowScan):
    """The window rules applied to rows fed newest first (see the module docstring)."""

    remembers = True

    @property
    def _fed_tokens(self) -> dict[int, int]:
        """Every position fed and its tokens (a ``WindowScan`` remembers them)."""
        assert self._remembered is not None
        return self._remembered

    def feed(self, position: int, row: RowFacts) -> None:
        """Take the row at ``position``, one below the last one fed."""
        if self.done:
            return
        if self._next is not None and position > self._next:
            raise ValueError(f"rows are fed newest first: expected a position below {self._next + 1}")
        self._next = position - 1
        system = row.role == "system"
        self._fed_tokens[position] = row.tokens
        if not (system and self.keep_system):
            self.cost += row.tokens
        if row.answers is not None:
            self._pending.add(row.answers)
        self._pending.difference_update(row.calls)
        if not system:
            self._first_role = row.role
        if self._valid_start(row):
            if self._needed is None:
                self._needed = self.cost
            if self.cost <= self.budget:
                self._best = position
        if self.cost > self.budget and self._needed is not None:
            self.done = True  # every earlier start costs at least as much

    def _valid_start(self, row: RowFacts) -> bool:
        if self._pending or row.role == "tool":
            return False  # a result would lead, or stand without its call
        if row.role == "system" and self.keep_system:
            return False  # kept anyway: the start is the non-system row after it
        return self.first_role is None or self._first_role in (None, self.first_role)

    def window(self, total: int, total_tokens: int | None) -> Window:
        """The window found once ``done`` or once the oldest row was fed.

        ``total`` and ``total_tokens``: the buffer's rows and their tokens, for what
        was cut (``total_tokens`` None: not known, ``cut_tokens`` None). Raises
        :class:`WindowTooSmallError` when a buffer with rows has no sendable window
        in the budget.
        """
        if self._best is None:
            needed = self._needed if self._needed is not None else self.cost
            if total and needed > self.budget:
                raise too_small(self.budget, needed)
            suffix: list[int] = []  # no non-system row to start on: the system rows alone
        else:
            best = self._best
            suffix = sorted(p for p in self._fed_tokens if p >= best)
        first = suffix[0] if suffix else None
        before = tuple(p for p in sorted(self._systems) if first is None or p < first)
        kept = before + tuple(suffix)
        tokens = sum(self._systems[p] for p in before) + sum(self._fed_tokens[p] for p in suffix)
        cut = None if total_tokens is None else total_tokens - tokens
        return Window(total - len(suffix), kept, tokens, total - len(kept), cut, total)


def too_small(budget: int, needed: int) -> WindowTooSmallError:
    """The refusal of a budget smaller than the smallest sendable window (``needed``)."""
    return WindowTooSmallError(
        f"no sendable window fits in {budget} tokens: the newest turn (with its calls' "
        f"results and the kept system messages) needs {needed}; raise max_tokens",
        argument="max_tokens",
        budget=budget,
        needed=needed,
    )


def fit(
    rows: Sequence[RowFacts],
    budget: int,
    keep_system: bool = True,
    first_role: str | None = None,
) -> Window:
    """Return the window of ``budget`` tokens over the whole buffer ``rows`` (the plain path)."""
    systems = {i: row.tokens for i, row in enumerate(rows) if row.role == "system"}
    scan = WindowScan(budget, systems, keep_system, first_role)
    for position in range(len(rows) - 1, -1, -1):
        scan.feed(position, rows[position])
        if scan.done:
            break
    return scan.window(len(rows), sum(row.tokens for row in rows))


def row_facts(row: Mapping[str, Any], tokens: int) -> RowFacts:
    """The window facts of one stored (or flat) row counted ``tokens``."""
    role = str(row.get("role"))
    if role == "assistant":  # only an assistant declares calls, only a tool row answers one
        return RowFacts(role, tokens, tuple(call_ids(row)))
    if role == "tool":
        return RowFacts(role, tokens, (), result_id(row))
    return RowFacts(role, tokens)
