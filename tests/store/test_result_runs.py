"""MEM-3 heals at the end of a turn's result run, on every backend.

The SQL backends find the run's end on the primary key (decisions 0068, 0094); the
memory store walks its rows. Each must put the placeholders right after the results
that arrived, before the next non-tool row.
"""

from __future__ import annotations

from flowmem.core import prepare, result_id
from flowmem.store import Address, Store
from tests.store.runs import half_answered


def _shape(store: Store, address: Address) -> list[tuple[str, str | None]]:
    return [(row["role"], result_id(row)) for row in store.load(address)]


def test_mem_3_a_user_turn_heals_every_open_call_after_the_run(store: Store) -> None:
    address = Address("user", "u", "heal-after-run")
    half_answered(store, address, 6)
    store.append(address, prepare({"role": "user", "content": "next"}, 1))
    assert _shape(store, address) == [
        ("user", None),
        ("assistant", None),
        *[("tool", f"c{n}") for n in range(6)],  # c3..c5 healed right after c0..c2's run
        ("user", None),
    ]


def test_mem_3_the_run_ends_at_the_first_row_after_it_not_at_the_buffers_end(
    store: Store,
) -> None:
    address = Address("user", "u", "end")
    half_answered(store, address, 4)
    store.append(address, prepare({"role": "assistant", "content": "thinking"}, 1))
    store.append(address, prepare({"role": "user", "content": "next"}, 1))
    assert _shape(store, address) == [
        ("user", None),
        ("assistant", None),
        ("tool", "c0"),
        ("tool", "c1"),
        ("tool", "c2"),  # healed where the run ends, before the assistant's next row
        ("tool", "c3"),
        ("assistant", None),
        ("user", None),
    ]
