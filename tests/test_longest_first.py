"""tests/longest_first.py and its hook in tests/conftest.py: an xdist run starts the longest tests' modules first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.longest_first import longest_first, recorded

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Item:
    nodeid: str


modules = st.lists(
    st.sampled_from(["a.py", "b.py", "c.py", "d/e.py", "f.py"]), min_size=0, max_size=40
)


@given(
    modules,
    st.dictionaries(
        st.sampled_from(["a.py", "b.py", "c.py", "d/e.py", "x.py"]), st.floats(0, 100), max_size=5
    ),
)
def test_the_same_items_each_module_whole_in_its_order_the_longest_first(
    where: list[str], longest: dict[str, float]
) -> None:
    items = [Item(f"{module}::test_{n}") for n, module in enumerate(where)]
    ordered = longest_first(items, longest)

    assert sorted(ordered, key=items.index) == items  # a permutation: the same tests, each once
    runs = [item.nodeid.split("::")[0] for item in ordered]
    seen = [m for n, m in enumerate(runs) if n == 0 or runs[n - 1] != m]
    assert len(seen) == len(set(seen))  # each module whole
    for module in seen:  # in its own order
        assert [i for i in ordered if i.nodeid.startswith(module + "::")] == [
            i for i in items if i.nodeid.startswith(module + "::")
        ]
    first_seen = {m: where.index(m) for m in set(where)}
    expected = sorted(first_seen, key=lambda m: (-longest.get(m, 0.0), first_seen[m]))
    assert seen == expected  # the longest recorded first, the others as collected


def test_a_missing_or_unreadable_record_orders_nothing(tmp_path: Path) -> None:
    assert recorded(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert recorded(tmp_path / "bad.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert recorded(tmp_path / "list.json") == {}
    items = [Item("b.py::t"), Item("a.py::t")]
    assert longest_first(items, {}) == items


def test_the_recorded_file_names_modules_of_the_suite() -> None:
    found = recorded()
    assert found, (
        "tests/longest_tests.json: python -m tests.suite_cpu PREFIX --durations tests/longest_tests.json"
    )
    missing = [m for m in found if not (ROOT / m).is_file()]
    assert len(missing) <= len(found) // 4, (
        f"stale entries: {missing}"
    )  # renamed modules: record it again


CONFTEST = """
import tests.longest_first
from pathlib import Path
tests.longest_first.LONGEST = Path(__file__).with_name("longest.json")
from tests.conftest import pytest_collection_modifyitems  # noqa: F401
"""
SAMPLE = """
import os

def test_{name}_1():
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write("{name}_1\\n")

def test_{name}_2():
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write("{name}_2\\n")
"""


@pytest.mark.parametrize(
    ("mode", "order"),
    [
        (["-n", "1"], ["c_1", "c_2", "b_1", "b_2", "a_1", "a_2", "d_1", "d_2"]),
        (["-p", "no:xdist"], ["a_1", "a_2", "b_1", "b_2", "c_1", "c_2", "d_1", "d_2"]),
    ],
    ids=["an xdist worker: the longest first", "one process: as collected"],
)
def test_an_xdist_worker_runs_the_recorded_longest_modules_first(
    tmp_path: Path, mode: list[str], order: list[str]
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in "abcd":
        (tmp_path / f"test_{name}.py").write_text(SAMPLE.format(name=name))
    (tmp_path / "longest.json").write_text(
        json.dumps({"test_c.py": 9.0, "test_b.py": 2.5, "gone.py": 30.0})
    )
    log = tmp_path / "order.log"
    outer = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")
    }  # an xdist worker's
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *mode,
         "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**outer, "PYTHONPATH": str(ROOT), "ORDER_LOG": str(log)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout
    assert log.read_text().split() == order
