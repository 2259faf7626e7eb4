"""What ``HotPool`` (store/postgres/connect.py) takes from psycopg_pool beyond its documented API is still there.

Decisions 0167 and 0202: ``HotPool`` reads a pooled connection's expiry and creation
times, the pool's drain time, counts and statistics, overrides the pool's start-up
(``_start_workers``, ``_start_initial_tasks``), puts its first connection in with
``_add_to_pool`` and schedules psycopg_pool's own maintenance tasks. These tests fail
when an installed psycopg_pool renames or reshapes one of them, before a store opens;
pyproject.toml bounds psycopg-pool's version to the minors tested for the same reason
(3.2 has no ``drain`` nor ``_created_at``: the bound starts at 3.3).
"""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest

psycopg_pool = pytest.importorskip("psycopg_pool")

import psycopg_pool.pool as pool_module  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from psycopg_pool import ConnectionPool  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]

# the pool's methods HotPool overrides or calls, with the parameters it passes by position
POOL_METHODS = {
    "_start_workers": ["self"],
    "_start_initial_tasks": ["self"],
    "_add_to_pool": ["self", "conn"],
    "_set_connection_expiry_date": ["self", "conn"],
    "run_task": ["self", "task"],
    "schedule_task": ["self", "task", "delay"],
    "resize": ["self", "min_size", "max_size"],
    "drain": ["self"],
    "getconn": ["self", "timeout"],
    "putconn": ["self", "conn"],
    "close": ["self", "timeout"],
}
# the attributes a pool has once made (not opened), which HotPool reads or sets
POOL_ATTRIBUTES = (
    "_workers",
    "_nconns",
    "_stats",
    "_closed",
    "_min_size",
    "_drained_at",
    "max_idle",
)
# the maintenance tasks HotPool makes, with the parameters it passes by position
TASKS = {
    "AddConnection": ["self", "pool"],
    "ShrinkPool": ["self", "pool"],
    "Schedule": ["self", "pool", "task", "delay"],
}


def _leading(function: Any, count: int) -> list[str]:
    return list(inspect.signature(function).parameters)[:count]


@pytest.mark.parametrize("name", sorted(POOL_METHODS))
def test_the_pool_has_the_methods_hot_pool_overrides_and_calls(name: str) -> None:
    wanted = POOL_METHODS[name]
    assert _leading(getattr(ConnectionPool, name), len(wanted)) == wanted


def test_a_pool_made_and_not_opened_has_the_attributes_hot_pool_reads() -> None:
    pool = ConnectionPool("postgresql://", min_size=0, max_size=1, open=False)
    missing = [name for name in POOL_ATTRIBUTES if not hasattr(pool, name)]
    assert missing == []
    assert pool._workers == [] and pool._nconns == 0
    pool._stats[pool._CONNECTIONS_NUM] += 1
    assert pool.get_stats()[pool._CONNECTIONS_NUM] == 1


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_maintenance_tasks_hot_pool_makes_take_the_pool_first(name: str) -> None:
    task = getattr(pool_module, name)
    assert issubclass(task, pool_module.MaintenanceTask)
    assert _leading(task.__init__, len(TASKS[name])) == TASKS[name]


def test_open_starts_the_workers_before_the_initial_tasks() -> None:
    # HotPool's _start_workers does nothing and its _start_initial_tasks wakes the
    # threads when it has work: that holds only while open() calls them in this order
    source = inspect.getsource(ConnectionPool._open)
    assert source.index("self._start_workers()") < source.index("self._start_initial_tasks()")


def test_a_pooled_connection_has_its_expiry_and_creation_times(postgres_url: str) -> None:
    pool = ConnectionPool(postgres_url, min_size=1, max_size=1, kwargs={"autocommit": True})
    with pool, pool.connection() as conn:
        assert isinstance(conn._expire_at, float)
        assert isinstance(conn._created_at, float)


def test_the_installed_psycopg_pool_is_one_pyproject_allows() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [Requirement(r) for r in extras["project"]["optional-dependencies"]["postgres"]]
    (bound,) = [r for r in wanted if r.name == "psycopg-pool"]
    assert psycopg_pool.__version__ in bound.specifier, (
        psycopg_pool.__version__,
        str(bound.specifier),
    )
