"""MEM-5 normalization of a read page by page, repair included (issue 38 §2, decision 0113).

``normalize(entries, keep_content=True)`` is global: step 2 moves the system rows
first and step 3 moves a late result back to its call's turn, which may be anywhere
after it. Run twice over the same entries, in order, it needs no row held beyond
the one it is on:

- ``RepairPlan`` (the first pass) runs steps 1 and 3's scan (``normalize._Pairing``,
  the rule's own code) over every entry and keeps what the second pass must know
  ahead: the system rows (written first), the ids of the calls that got a result
  anywhere, and for each call whose result comes late (after its turn's result run)
  the *key* of that result's entry, never the entry.
- ``RepairRows`` (the second pass) runs the same scan again and writes each row as
  ``normalize._emit`` writes it: a result in its turn's run as it comes, a turn
  without the calls no result answers that text cannot answer, and after each turn's
  run its late results (read again by key: ``fetch``) or the synthetic interrupted
  ones. The scan's tables indexed by position are emptied as each row is written.

What either pass holds besides the row it is on: the system rows; the ids of the
calls declared and of those answered (a set of strings each, as the fast path's
scan keeps); the keys of the late results; a turn's ids while its run is open.
Step 4 (a tool row left leading) never acts after this repair: every result written
follows a turn written before it. Oracle: ``tests/core/test_normalize_pages.py`` and
``tests/api/test_provider_pages.py`` (the rows and bytes of ``normalize`` over the
whole list, for random histories cut in pages of 1–4 rows).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from flowmem.core.fast import fast_entry_id
from flowmem.core.messages import Message, healed_flat, is_empty_content
from flowmem.core.normalize import _flat_row, _is_placeholder, _Pairing

Keyed = tuple[Hashable, object]  # a key that reads the entry again, and the entry


class _Scan:
    """Steps 1 and 3's scan over the entries in order (system rows apart), the positional tables emptied."""

    def __init__(self) -> None:
        self.pairing = _Pairing(True, set())
        self.unreadable = 0
        self.index = 0  # the position among the rows other than system rows

    def row(self, entry: object) -> tuple[Message, int] | None:
        """The flat row of one entry and its position, taken by the scan; None when step 1 drops it."""
        row = _flat_row(entry, True)
        if row is None:
            self.unreadable += 1
            return None
        if row["role"] == "system":
            return row, -1
        index, pairing = self.index, self.pairing
        self.index += 1
        role = row["role"]
        if role == "tool":
            placeholder = _is_placeholder(entry)  # type: ignore[arg-type]  # a row of a map
            if placeholder:
                pairing.placeholders.add(id(row))
            pairing.take_result(index, row)
            if placeholder:
                pairing.placeholders.discard(id(row))
        elif role == "assistant":
            pairing.declare_calls(index, row)
            for cid in pairing.turn_ids.get(index, ()):
                if cid in pairing.untextable:
                    pairing.untextable[cid] = None  # its id is what is looked up, not its entry
        else:
            pairing.end_run()
        return row, index


class RepairPlan:
    """The first pass: every entry once, in order (``feed``); what the second pass needs ahead."""

    def __init__(self) -> None:
        self._scan = _Scan()
        self.systems: list[Message] = []  # normalized, in order
        self.late: dict[str, Hashable] = {}  # call id -> the key of its late result

    def feed(self, entries: Iterable[Keyed]) -> None:
        """Take the next entries (parsed), each with the key that reads it again."""
        scan = self._scan
        pairing = scan.pairing
        for key, entry in entries:
            found = scan.row(entry)
            if found is None:
                continue
            row, index = found
            if index < 0:
                self.systems.append(row)
                continue
            if pairing.late:  # a late result: its key, not the row
                cid = next(iter(pairing.late))
                del pairing.late[cid]
                self.late[cid] = key
            pairing.turn_ids.clear()
            pairing.in_run.clear()
            pairing.gone.clear()

    @property
    def answered(self) -> set[str]:
        """The ids of the calls some result answers (once every entry was fed)."""
        return self._scan.pairing.answered


class RepairRows:
    """The second pass: the normalized rows other than system rows, a page of entries at a time (``of``, ``end``).

    ``fetch(key)`` reads again the entry of a late result the plan named; ``dropped``
    (once ``end`` was called) is ``normalize``'s count for the whole list.
    """

    def __init__(self, plan: RepairPlan, fetch: Callable[[Hashable], object]) -> None:
        self._scan = _Scan()
        self._answered = plan.answered
        self._late = plan.late
        self._fetch = fetch
        self._open: list[str] = []  # the calls of the turn whose result run is being written

    @property
    def dropped(self) -> int:
        """Entries and calls normalization removed so far (the whole list's, after ``end``)."""
        return self._scan.unreadable + self._scan.pairing.dropped

    def of(self, entries: Iterable[Keyed]) -> list[Message]:
        """The rows the next entries write, in ``normalize``'s order (late results moved in)."""
        out: list[Message] = []
        scan = self._scan
        pairing = scan.pairing
        for _, entry in entries:
            found = scan.row(entry)
            if found is None or found[1] < 0:
                continue
            row, index = found
            pairing.late.clear()  # the plan knows where they are
            if row["role"] == "tool":
                if index in pairing.in_run:
                    pairing.in_run.discard(index)
                    out.append(row)
                continue
            if self._open:
                self._close(out)
            if index in pairing.gone:
                pairing.gone.discard(index)
                continue
            ids = pairing.turn_ids.pop(index, None)
            if ids and pairing.untextable:
                ids = self._without_unanswerable(row, ids)
                if not ids and is_empty_content(row.get("content")):
                    pairing.dropped += 1  # the turn had only calls no placeholder can answer
                    continue
            out.append(row)
            if ids:
                self._open = ids
        return out

    def end(self) -> list[Message]:
        """The rows after the last entry: the last turn's late or synthetic results."""
        out: list[Message] = []
        if self._open:
            self._close(out)
        return out

    def _close(self, out: list[Message]) -> None:
        """``normalize._close_run``: each call not answered in its run, its late result or a synthetic one."""
        for cid in self._open:
            key = self._late.get(cid)
            if key is not None:
                row = _flat_row(self._fetch(key), True)
                if row is None or row["role"] != "tool":  # the first pass read it as a result
                    raise ValueError("a late result the first pass read is not one now")
                row["tool_call_id"] = cid
                out.append(row)
            elif cid not in self._answered:
                out.append(healed_flat(cid))
        self._open = []

    def _without_unanswerable(self, turn: Message, ids: list[str]) -> list[str]:
        """``normalize._without_unanswerable``, against the whole list's answered ids."""
        untextable = self._scan.pairing.untextable
        gone = {cid for cid in ids if cid in untextable and cid not in self._answered}
        if not gone:
            return ids
        self._scan.pairing.dropped += len(gone)
        calls = [call for call in turn["tool_calls"] if fast_entry_id(call) not in gone]
        if calls:
            turn["tool_calls"] = calls
        else:
            del turn["tool_calls"]
        return [cid for cid in ids if cid not in gone]


def normalized_in_pages(pages: list[list[Any]]) -> tuple[list[Message], int]:
    """``normalize(every entry, keep_content=True)``'s rows and count, by the two passes (the tests' form)."""
    keyed = [[((n, at), entry) for at, entry in enumerate(page)] for n, page in enumerate(pages)]
    plan = RepairPlan()
    for page in keyed:
        plan.feed(page)
    rows = RepairRows(plan, lambda key: pages[key[0]][key[1]])  # type: ignore[index]
    out = list(plan.systems)
    for page in keyed:
        out += rows.of(page)
    out += rows.end()
    return out, rows.dropped


__all__ = ["Keyed", "RepairPlan", "RepairRows", "normalized_in_pages"]
