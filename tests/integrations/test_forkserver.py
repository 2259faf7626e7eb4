"""The fork server helper: a caller's children start with its modules imported, whoever started the server before."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from multiprocessing import forkserver as mp_forkserver
from typing import Any

import pytest

from tests.integrations import forkserver

# light standard-library modules nothing here imports otherwise
ONE = ["colorsys"]
OTHER = ["wave"]


@pytest.fixture(autouse=True)
def _no_server_left() -> Iterator[None]:
    forkserver.stop()
    yield
    forkserver.stop()


def _report(names: list[str], results: Any) -> None:
    results.put([name in sys.modules for name in names])


def _preloaded(context: Any, names: list[str]) -> list[bool]:
    """Whether a child of ``context`` found each module imported before it ran."""
    results = context.Queue()
    child = context.Process(target=_report, args=(names, results))
    child.start()
    found: list[bool] = results.get(timeout=60)
    child.join(60)
    return found


def test_a_callers_children_have_its_modules_after_another_caller_restarted_the_server() -> None:
    first = forkserver.context(ONE)
    assert _preloaded(first, ONE + OTHER) == [True, False]
    # another caller stops the server and starts one preloading its own modules
    mp_forkserver._forkserver._stop()  # type: ignore[attr-defined]
    mp_forkserver.set_forkserver_preload(OTHER)
    mp_forkserver.ensure_running()
    again = forkserver.context(ONE)
    assert _preloaded(again, ONE) == [True]


def test_a_running_server_with_every_module_is_kept_and_one_without_is_replaced() -> None:
    forkserver.context(ONE + OTHER)
    pid = mp_forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    forkserver.context(OTHER)  # a subset: the same server
    assert mp_forkserver._forkserver._forkserver_pid == pid  # type: ignore[attr-defined]
    forkserver.context(["json", *OTHER])  # a module it lacks: a new server
    assert mp_forkserver._forkserver._forkserver_pid not in (None, pid)  # type: ignore[attr-defined]
