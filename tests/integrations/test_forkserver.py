"""The fork server helper: a caller's children start with its modules imported, whoever started the server before.

The checks that start and stop servers run in an interpreter of their own: stopping this
process's server would make its next forking test start one again (seconds of imports).
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing import forkserver as mp_forkserver
from pathlib import Path
from typing import Any

from tests.integrations import forkserver

# light standard-library modules nothing here imports otherwise
ONE = ["colorsys"]
OTHER = ["wave"]


ROOT = Path(__file__).resolve().parents[2]


def _isolated(check: str) -> None:
    """Run ``check`` of this module in a new interpreter; it must pass there."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    code = f"import tests.integrations.test_forkserver as t; t.{check}(); t.forkserver.stop()"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]


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
    _isolated("restarted")


def restarted() -> None:
    """A caller's server, stopped by another caller that started its own: the caller's again."""
    first = forkserver.context(ONE, alone=True)
    assert _preloaded(first, ONE + OTHER) == [True, False]
    # another caller stops the server and starts one preloading its own modules
    mp_forkserver._forkserver._stop()  # type: ignore[attr-defined]
    mp_forkserver.set_forkserver_preload(OTHER)
    mp_forkserver.ensure_running()
    again = forkserver.context(ONE, alone=True)
    assert _preloaded(again, ONE) == [True]


def test_a_running_server_with_every_module_is_kept_and_one_without_is_replaced() -> None:
    _isolated("kept_or_replaced")


def kept_or_replaced() -> None:
    """A server with every module asked for is kept; one without is replaced."""
    forkserver.context(ONE + OTHER, alone=True)
    pid = mp_forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    forkserver.context(OTHER, alone=True)  # a subset: the same server
    assert mp_forkserver._forkserver._forkserver_pid == pid  # type: ignore[attr-defined]
    forkserver.context(["json", *OTHER], alone=True)  # a module it lacks: a new server
    assert mp_forkserver._forkserver._forkserver_pid not in (None, pid)  # type: ignore[attr-defined]


def _frozen(results: Any) -> None:
    import gc

    results.put(gc.get_freeze_count())


def test_a_child_finds_what_its_server_preloaded_frozen() -> None:
    _isolated("frozen")


def frozen() -> None:
    """The server's preloads are frozen (``gc.freeze``): a child's collections never traverse them."""
    context = forkserver.context(ONE, alone=True)
    results = context.Queue()
    child = context.Process(target=_frozen, args=(results,))
    child.start()
    count: int = results.get(timeout=60)
    child.join(60)
    assert count > 1000, count  # the interpreter's and the preloaded modules' objects


def test_a_new_server_preloads_every_forking_test_s_modules_unless_alone() -> None:
    """One server per test process serves the kill matrix, the writers and the agents alike.

    (Checked on the list: starting a server with every framework costs seconds of CPU.)
    The module that freezes what they made comes last.
    """
    frozen = forkserver.FROZEN
    assert forkserver.started_with(["json"]) == ["json", *forkserver.SUITE, frozen]
    assert forkserver.started_with(["json"], alone=True) == ["json", frozen]
    assert forkserver.started_with([frozen, "json"], alone=True) == ["json", frozen]
    from tests.integrations import test_shared_server as shared_server
    from tests.integrations.adk import test_two_runners as two_runners
    from tests.integrations.langgraph import test_crash as crash
    from tests.integrations.langgraph import test_two_writers as two_writers
    from tests.integrations.pydantic_ai import test_crash as pydantic_ai_crash

    callers = [
        harness_modules(),
        two_writers.PRELOAD,
        two_runners.PRELOAD,
        shared_server.PRELOAD,
        crash.PRELOAD,
        pydantic_ai_crash.PRELOAD,
    ]
    for preload in callers:  # a server started for any of them serves every other one
        assert set(preload) <= set(forkserver.SUITE), preload


def harness_modules() -> list[str]:
    """The kill harness's preload in the suite (every program)."""
    from tests.integrations.kill import harness

    return [harness.__name__, *(f"tests.integrations.kill.programs.{p}" for p in harness.PROGRAMS)]
