"""The reads whose work grows with the buffer run off the event loop, their answers too (issue 38 §2).

Judged by instrumenting, not by timing: each piece of a long read's work records
whether it ran on the thread of a running event loop. ``/health`` waiting behind
such reads is measured in ``bench/read_memory.py --health``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from flowmem.api import long_reads
from flowmem.api.routes import compaction as compaction_routes
from flowmem.api.routes import memory as memory_routes
from flowmem.service import MemoryService
from tests.api.helpers import Api

ROWS = 600  # more than one page (512 rows): a provider-format read reads several


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[bool]]:
    """For each instrumented step of a read: whether each call of it ran on the event loop."""
    found: dict[str, list[bool]] = {}

    def watch(owner: Any, name: str, step: str | None = None) -> None:
        plain: Callable[..., Any] | None = getattr(owner, name, None)
        if plain is None:  # a module that renders no answer of its own
            return

        def watched(*args: Any, **kwargs: Any) -> Any:
            found.setdefault(step or name, []).append(_on_loop())
            return plain(*args, **kwargs)

        monkeypatch.setattr(owner, name, watched)

    for name in ("load", "compaction_plan", "next_page", "read_segment"):
        watch(MemoryService, name)
    watch(memory_routes, "_converted")  # normalize and convert to a provider's format
    # the answer's JSON, whole or in pieces: a route's own, a paged long read's (long_reads)
    for module in (memory_routes, compaction_routes, long_reads):
        watch(module, "render")
        watch(module, "render_pieces", "render")
    return found


@pytest.fixture
def long_buffer(any_api: Api) -> Api:
    """A buffer of ``ROWS`` rows, written before the steps are watched."""
    rows = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"m{n}"} for n in range(ROWS)]
    answer = any_api.call("POST", "/v1/buffers/user/long", json={"messages": rows})
    assert answer.status_code == 200, answer.text
    return any_api


@pytest.mark.parametrize(
    ("path", "params", "steps"),
    [
        ("/v1/buffers/user/long", {"max_tokens": 10**9}, {"load", "render"}),
        ("/v1/buffers/user/long", {"max_tokens": 10**9, "format": "anthropic"}, {"load", "render"}),
        ("/v1/buffers/user/long", {"archived": "true"}, {"load", "render"}),
        ("/v1/buffers/user/long/compact/plan", {"keep_tokens": 10}, {"compaction_plan", "render"}),
        ("/v1/buffers/user/long", {"format": "anthropic"}, {"next_page", "_converted", "render"}),
    ],
)
def test_a_long_read_and_its_answer_run_off_the_event_loop(
    long_buffer: Api, seen: dict[str, list[bool]], path: str, params: dict[str, Any], steps: set[str]
) -> None:
    answer = long_buffer.call("GET", path, params=params)
    assert answer.status_code == 200, answer.text
    assert steps <= set(seen), seen
    on_loop = {name for name in steps if any(seen[name])}
    assert not on_loop, f"ran on the event loop: {sorted(on_loop)}"


@pytest.mark.parametrize(
    ("path", "params", "step"),
    [
        ("/v1/buffers/user/long", {"max_tokens": 10**9}, "read_segment"),
        ("/v1/buffers/user/long", {"archived": "true"}, "read_segment"),
        ("/v1/buffers/user/long/compact/plan", {"keep_tokens": 10}, "read_segment"),
        ("/v1/buffers/user/long", {}, "next_page"),
        ("/v1/buffers/user/long", {"format": "openai"}, "next_page"),
    ],
)
def test_the_pages_of_a_long_read_are_read_off_the_event_loop(
    long_buffer: Api, seen: dict[str, list[bool]], path: str, params: dict[str, Any], step: str
) -> None:
    """A page read on the loop held it for the page's rows while eight readers' pages queued (``StorePool.page``)."""
    answer = long_buffer.call("GET", path, params=params)
    assert answer.status_code == 200, answer.text
    assert seen.get(step), f"no page read through {step}: {seen}"
    assert not any(seen[step]), f"{step} ran on the event loop"


def test_a_short_provider_read_is_still_answered_on_the_loop(api: Api, seen: dict[str, list[bool]]) -> None:
    """A read of one page stays on the loop (no thread hop for the common case)."""
    rows = [{"role": "user", "content": "hi"}]
    assert api.call("POST", "/v1/buffers/user/short", json={"messages": rows}).status_code == 200
    answer = api.call("GET", "/v1/buffers/user/short", params={"format": "openai"})
    assert answer.status_code == 200
    assert seen["_converted"] == [True]


def test_an_answer_written_in_pieces_is_the_same_bytes() -> None:
    from flowmem.api.render import PIECE, render, render_pieces

    rows = [{"role": "user", "content": f"é{n}\u2028", "meta": {"a": [1, 2.5, None, True]}} for n in range(3 * PIECE + 7)]
    for answer in ({"messages": rows, "count": 3, "window": {"cut": 1}, "next_before": None}, {"messages": []}, rows):
        assert render_pieces(answer) == render(answer)
