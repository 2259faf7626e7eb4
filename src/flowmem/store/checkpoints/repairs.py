"""What a LangGraph thread's line rows repaired, for the line's repair log (issue 37 §2).

A thread's lines are written verbatim, as LangGraph hands the messages (decision
0040): the buffer rules never run on them, so a MEM-3 placeholder is written by
``FlowmemHealing`` / ``heal_hook`` in the graph and a late ``ToolMessage`` is appended
after the placeholder it supersedes. A checkpoint's write tells the log of the line
it adds rows to what is new, by comparing the rows with what the thread's lines held:

- **MEM-3** (``heal``): a placeholder — flowmem's mark (``metadata.healed``) or a
  ``ToolMessage`` whose id starts ``flowmem-healed-`` (kept in the row's
  ``metadata.extra.langchain.fields.id``) — for a call no line of the thread had a
  placeholder for. A later line that copies the history (a heal rewrites the list, a
  fork starts anew) carries the placeholder again: not a new heal.
- **MEM-10** (``replace``): a real result for a call the line has a placeholder for,
  when no line of the thread held both already (so a copy is not a new replacement).

Pure: the back-ends give ``line_repairs`` what the thread's lines hold for the call
ids the new rows answer (``answered_ids``), read in the write's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowmem.core import Message, Repair, is_healed, result_id

HEALED_ID_PREFIX = "flowmem-healed-"
"""A LangGraph MEM-3 placeholder's message id: this, then the call id (``FlowmemHealing``)."""


def _message_id(row: Mapping[str, Any]) -> object:
    meta = row.get("metadata")
    extra = meta.get("extra") if isinstance(meta, Mapping) else None
    chain = extra.get("langchain") if isinstance(extra, Mapping) else None
    fields = chain.get("fields") if isinstance(chain, Mapping) else None
    return fields.get("id") if isinstance(fields, Mapping) else None


def is_placeholder(row: Mapping[str, Any]) -> bool:
    """Whether a tool row is a MEM-3 placeholder: flowmem's mark or ``FlowmemHealing``'s message id."""
    if result_id(row) is None:
        return False
    found = _message_id(row)
    return is_healed(row) or (isinstance(found, str) and found.startswith(HEALED_ID_PREFIX))


def answered_ids(rows: Sequence[Message]) -> list[str]:
    """The call ids the tool rows among ``rows`` answer, once each, in order."""
    found: list[str] = []
    for row in rows:
        cid = result_id(row)
        if cid is not None and cid not in found:
            found.append(cid)
    return found


def line_repairs(
    key: str, rows: Sequence[Message], held: Mapping[str, Sequence[tuple[str, Message]]]
) -> tuple[Repair, ...]:
    """The MEM-3 and MEM-10 entries for ``rows`` added to line ``key`` (the module docstring).

    ``held``: per call id the new rows answer, the (line key, row) of every row that
    answers it in the thread's lines before the write.
    """
    healed_before: set[str] = set()
    settled: set[str] = set()  # a line held a placeholder and a real result for it
    mine: set[str] = set()  # the line has a placeholder for it
    for cid, found in held.items():
        by_line: dict[str, set[bool]] = {}
        for line, row in found:
            by_line.setdefault(line, set()).add(is_placeholder(row))
        if any(True in kinds for kinds in by_line.values()):
            healed_before.add(cid)
        if any(kinds == {True, False} for kinds in by_line.values()):
            settled.add(cid)
        if True in by_line.get(key, set()):
            mine.add(cid)
    healed: list[str] = []
    replaced: list[str] = []
    for row in rows:
        answers = result_id(row)
        if answers is None:
            continue
        if is_placeholder(row):
            if answers not in healed_before and answers not in healed:
                healed.append(answers)
            mine.add(answers)
        elif answers in mine and answers not in settled and answers not in replaced:
            replaced.append(answers)
    repairs = []
    if healed:
        repairs.append(Repair("MEM-3", tuple(healed), len(healed)))
    if replaced:
        repairs.append(Repair("MEM-10", tuple(replaced), len(replaced)))
    return tuple(repairs)


__all__ = ["HEALED_ID_PREFIX", "answered_ids", "is_placeholder", "line_repairs"]
