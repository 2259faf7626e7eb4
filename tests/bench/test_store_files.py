"""``bench/store.py``'s rounds over several fresh files a run (``--files``, decision 0198), in process.

Fake systems record what the bench asks of them: each file is filled once and gets the
run's ``rounds`` single appends, numbered from its own length, in the order the rounds
make them; a run's samples pool every file's appends; loads are timed on the first file
only; one file a run is the bench as it was (same buffer names, same calls).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
_SHADOWED = ("pgserver", "report_json", "siblings")  # bench/lib's names, one of them a wheel's


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """bench/store.py loaded by path; the sys.path entry and bench/lib modules it adds are undone."""
    path, modules = list(sys.path), {name: sys.modules.get(name) for name in _SHADOWED}
    spec = importlib.util.spec_from_file_location("flowmem_bench_store_files", BENCH / "store.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        # the fakes make no garbage, and a full collection before each measure costs
        # 0.2-1 s in a worker late in the suite (its heap grown by thousands of tests)
        module._collect = lambda: None
    finally:
        sys.path[:] = path
        for name, known in modules.items():
            if known is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = known
    yield module
    sys.modules.pop(spec.name, None)


def _fakes(bench: ModuleType, made: list[Any]) -> list[Any]:
    """Two fake systems (the second sampled every other round), each instance recording its calls."""
    clock = itertools.count()  # the order of every append made, over all systems and files

    class Fake(bench.System):  # type: ignore[name-defined,misc]
        def __init__(self, folder: Path, lengths: tuple[int, ...], name: str) -> None:
            super().__init__(lengths)
            self.name, self.folder, self.calls = name, folder, []
            made.append(self)

        def fill(self, buffer: str, length: int) -> None:
            self.calls.append(("fill", buffer, length))

        def append(self, buffer: str, i: int) -> None:
            self.calls.append(("append", buffer, i, next(clock)))

        def last50(self, buffer: str) -> object:
            self.calls.append(("last50", buffer))
            return None

        def whole(self, buffer: str) -> object:
            self.calls.append(("whole", buffer))
            return None

    class Slow(Fake):
        every = 2

    lengths = (3, 7)
    return [
        bench.Spec("fast", lengths, lambda f: Fake(f, lengths, "fast")),
        bench.Spec("slow", lengths, lambda f: Slow(f, lengths, "slow")),
    ]


def test_each_file_is_filled_once_and_appended_every_round_from_its_own_length(
    bench: ModuleType, tmp_path: Path
) -> None:
    made: list[Any] = []
    plan = bench.Plan(lengths=(3, 7), rounds=4, files=3, loads=(1, 1))
    results = bench.run(_fakes(bench, made), 2, plan, tmp_path)

    assert len(made) == 2 * 2 * 2 * 3  # runs x lengths x systems x files
    assert len({system.folder for system in made}) == len(made)  # a fresh file each
    for system in made:
        fills = [c for c in system.calls if c[0] == "fill"]
        (fill,) = fills
        length, buffer = fill[2], fill[1]
        appends = [c for c in system.calls if c[0] == "append"]
        rounds = 4 // system.every
        assert [c[:3] for c in appends] == [("append", buffer, length + k) for k in range(rounds)]
    for name, every in (("fast", 1), ("slow", 2)):
        for length in (3, 7):
            runs = results.times[(name, length)]
            assert [len(found) for found in runs] == [
                3 * 4 // every
            ] * 2  # every file's appends pooled
            assert results.appended[(name, length)] == 3 * 4 // every
            assert len(results.rate[(name, length)]) == 2


def test_loads_are_timed_on_the_first_file_and_an_appends_file_is_its_index_modulo_files(
    bench: ModuleType, tmp_path: Path
) -> None:
    made: list[Any] = []
    plan = bench.Plan(lengths=(3, 7), rounds=4, files=3, loads=(1, 1))
    results = bench.run(_fakes(bench, made), 1, plan, tmp_path)

    loaded = [s for s in made if any(c[0] in ("last50", "whole") for c in s.calls)]
    assert sorted(s.folder.parent.name for s in loaded) == ["file0"] * 4  # 2 lengths x 2 systems
    assert [len(found) for found in results.last50.values()] == [1] * 4
    # the order the appends were made in: round by round, file 0 first in each round
    for name in ("fast", "slow"):
        for length in (3, 7):
            mine = [s for s in made if s.name == name and f"-n{length}" in str(s.folder)]
            made_in_order = sorted(
                (c[3], s.folder.parent.name, c[2])
                for s in mine
                for c in s.calls
                if c[0] == "append"
            )
            rounds = 4 // type(mine[0]).every
            assert [(f, i) for _, f, i in made_in_order] == [
                (f"file{k % 3}", length + k // 3) for k in range(3 * rounds)
            ]
            assert len(results.times[(name, length)][0]) == len(made_in_order)


def test_one_file_a_run_is_the_bench_as_it_was(bench: ModuleType, tmp_path: Path) -> None:
    made: list[Any] = []
    plan = bench.Plan(lengths=(3, 7), rounds=4, files=1, loads=(1, 1))
    assert bench.QUICK.files == 1  # --quick: one file, as before (the default: 5)
    bench.run(_fakes(bench, made), 2, plan, tmp_path)

    assert len(made) == 2 * 2 * 2
    for system in made:
        (fill,) = [c for c in system.calls if c[0] == "fill"]
        repeat = int(system.folder.parent.parent.name.split("-")[0][3:])
        assert fill[1] == f"r{repeat}-n{fill[2]}"  # the buffer names of a one-file run, unchanged
