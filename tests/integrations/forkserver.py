"""multiprocessing's fork server, started with the modules its caller needs preloaded.

A process has one fork server (multiprocessing's own, whatever the context object), and
its preloaded modules are those set when it started. The kill matrix and the two-writer,
two-runner and shared-server tests each want theirs: when one of them stopped the server
and another started it again with its own list, the first one's children each imported
their framework themselves (seconds of CPU a child; decision 0185). ``context`` gives
the server started with the caller's modules: the running one when it was started with
all of them, else a new one, which preloads the modules of every such test of the suite
(``SUITE``) beside the caller's: one server per test process serves them all, however
xdist orders their tests (``alone=True``: the caller's modules only).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import forkserver, get_context
from multiprocessing.context import ForkServerContext
from typing import NoReturn

SUITE = (
    "tests.integrations.kill.harness",
    *(
        f"tests.integrations.kill.programs.{program}"
        for program in (
            "langgraph_create_agent",
            "langgraph_tool_node",
            "langgraph_react",
            "openai_agents",
            "pydantic_ai",
            "adk",
            "langchain",
        )
    ),
    "tests.integrations.langgraph.writers",
    "tests.integrations.langgraph.crash_agent",
    "tests.integrations.pydantic_ai.crash_app",
    "tests.integrations.adk.writers",
    "tests.integrations.shared_agent",
    "flowmem.integrations.langgraph.saver",
    "flowmem.integrations.langgraph.healing",
    "flowmem.integrations.adk.service",
    "flowmem.integrations.openai_agents",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
    "langgraph.checkpoint.sqlite",
)
"""The modules of every test that forks from the server: the kill matrix's programs, the
LangGraph writers and crash agent, the pydantic-ai crash app, the ADK writers, the shared server's agents (a module
that cannot be imported is left out by multiprocessing)."""

_started: dict[str, object] = {"pid": None, "preload": frozenset()}
"""The server this module started last: its process id and preloaded modules."""


def running_preload() -> frozenset[str] | None:
    """The modules the running server preloaded, None when no server runs or another caller started it."""
    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    if pid is None or pid != _started["pid"]:
        return None
    preload = _started["preload"]
    assert isinstance(preload, frozenset)
    return preload


def context(preload: Sequence[str], alone: bool = False) -> ForkServerContext:
    """The forkserver context, its server running with every module of ``preload`` imported.

    A new server preloads ``SUITE`` too, unless ``alone``.
    """
    found = running_preload()
    if found is None or not set(preload) <= found:
        stop()
        modules = started_with(preload, alone)
        forkserver.set_forkserver_preload(modules)
        forkserver.ensure_running()
        _started["pid"] = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
        _started["preload"] = frozenset(modules)
    made = get_context("forkserver")
    assert isinstance(made, ForkServerContext)
    return made


FROZEN = "tests.integrations.frozen"
"""Imported last by every server this module starts: what the preloads made is frozen
(``gc.freeze``), so a child's collections never traverse it (decision 0188)."""


def started_with(preload: Sequence[str], alone: bool = False) -> list[str]:
    """The modules a new server for ``preload`` imports: ``preload``, ``SUITE`` unless ``alone``, then ``FROZEN``."""
    modules = dict.fromkeys([*preload, *(() if alone else SUITE)])
    return [*(name for name in modules if name != FROZEN), FROZEN]


def stop() -> None:
    """Stop the server if one runs (reaping it, so its CPU and its children's count in this process)."""
    if forkserver._forkserver._forkserver_pid is not None:  # type: ignore[attr-defined]
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    _started["pid"] = None


def run_main(
    main: Callable[[list[str]], int | None], argv: list[str], out: str, err: str
) -> NoReturn:
    """Run ``main(argv)`` in a forked child as ``python -m`` would: stdout and stderr to files, its exit code."""
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
    code = 1
    try:
        code = main(argv) or 0
    except SystemExit as exited:
        if isinstance(exited.code, int):
            code = exited.code
        elif exited.code is not None:
            print(exited.code, file=sys.stderr)
        else:
            code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
