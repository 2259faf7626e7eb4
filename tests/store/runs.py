"""A turn with open calls after a partial result run: what the result-run tests append."""

from __future__ import annotations

from flowmem.core import prepare
from flowmem.store import Address, Store


def half_answered(store: Store, address: Address, calls: int) -> None:
    """A user question and a turn declaring ``calls`` calls, the first half of them answered."""
    declared = [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for n in range(calls)]  # fmt: skip
    turn = {"role": "assistant", "content": "", "tool_calls": declared}
    results = [{"role": "tool", "content": "r", "tool_call_id": f"c{n}"} for n in range(calls // 2)]
    store.append(address, prepare([{"role": "user", "content": "q"}, turn, *results], 1))
