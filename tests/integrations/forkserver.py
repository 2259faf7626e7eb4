"""multiprocessing's fork server, started with the modules its caller needs preloaded.

A process has one fork server (multiprocessing's own, whatever the context object), and
its preloaded modules are those set when it started. The kill matrix and the two-writer,
two-runner and shared-server tests each want theirs: when one of them stopped the server
and another started it again with its own list, the first one's children each imported
their framework themselves (seconds of CPU a child; decision 0185). ``context`` gives
the server started with the caller's modules: the running one when it was started with
all of them, else a new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing import forkserver, get_context
from multiprocessing.context import ForkServerContext

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


def context(preload: Sequence[str]) -> ForkServerContext:
    """The forkserver context, its server running with every module of ``preload`` imported."""
    found = running_preload()
    if found is None or not set(preload) <= found:
        stop()
        forkserver.set_forkserver_preload(list(preload))
        forkserver.ensure_running()
        _started["pid"] = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
        _started["preload"] = frozenset(preload)
    made = get_context("forkserver")
    assert isinstance(made, ForkServerContext)
    return made


def stop() -> None:
    """Stop the server if one runs (reaping it, so its CPU and its children's count in this process)."""
    if forkserver._forkserver._forkserver_pid is not None:  # type: ignore[attr-defined]
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    _started["pid"] = None
