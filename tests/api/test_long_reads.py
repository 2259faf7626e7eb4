"""Long reads hold a page per reader (issue 38 §2, decision 0113): a window, a plan, a read with the archive.

Each is answered page by page from one snapshot; its bytes are those of the whole
read rendered at once (the in-process service's answer, the oracle). How many rows a
reader holds is judged by instrumenting the store's reads and the service's results:
the largest number of rows any one of them materialised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flowmem.api.render import render
from flowmem.service import MemoryService
from flowmem.service.paged_reads import PagedRead
from flowmem.store import tail as tail_module
from flowmem.store.base import PAGE_ROWS, TAIL_BATCH_MAX
from tests.api.helpers import Api

ROWS = 2600  # several pages and more than a batch of a read from the end
HELD = max(PAGE_ROWS, TAIL_BATCH_MAX)  # a page, or a batch of facts parsed and dropped

PATHS = {
    "window": ("/v1/buffers/user/long", {"max_tokens": 10**9}),
    "window_cut": ("/v1/buffers/user/long", {"max_tokens": 20_000}),
    "plan": ("/v1/buffers/user/long/compact/plan", {"keep_tokens": 5_000}),
    "archived": ("/v1/buffers/user/long", {"archived": "true"}),
}


def _rows(start: int, count: int) -> list[dict[str, Any]]:
    """Turns of every kind: users, system rows mid-buffer, calls with their results, long texts."""
    rows: list[dict[str, Any]] = []
    for n in range(start, start + count):
        if n % 7 == 3:
            rows.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]})
        elif n % 7 == 4:
            rows.append({"role": "tool", "tool_call_id": f"c{n - 1}", "content": f"r{n} é\u2028"})
        elif n % 97 == 5:
            rows.append({"role": "system", "content": f"rule {n}"})
        else:
            rows.append({"role": "user" if n % 2 else "assistant", "content": f"m{n} " + "x" * (n % 300)})
    return rows


@pytest.fixture(scope="module")
def long_buffer(module_any_api: Api) -> Api:
    """``ROWS`` rows, the oldest 600 of them compacted into the archive.

    Written once per backend and module (~0.4 s of CPU): the tests only read it.
    """
    any_api = module_any_api
    for start in range(0, ROWS, 1000):
        rows = _rows(start, min(1000, ROWS - start))
        answer = any_api.call("POST", "/v1/buffers/user/long", json={"messages": rows})
        assert answer.status_code == 200, answer.text
    service = MemoryService(any_api.store)
    keep = service_tokens(service) * 3 // 4
    done = service.compact_raw("user", "alice", "long", keep_tokens=keep, summarize=lambda rows: "summary")
    assert done.compacted and done.archived > 500
    return any_api


def service_tokens(service: MemoryService) -> int:
    """The buffer's tokens (the default counter): a window as large as the buffer keeps them all."""
    window = service.load_window_raw("user", "alice", "long", 10**12).window
    assert window is not None
    return window.tokens


def _oracle(api: Api, name: str) -> bytes:
    """The whole read, rendered at once: the in-process service's answer."""
    service = MemoryService(api.store)
    params = PATHS[name][1]
    if name.startswith("window"):
        result = service.load_window_raw("user", "alice", "long", params["max_tokens"])
        return render({**result.to_dict(), "next_before": None})
    if name == "plan":
        return render(service.compaction_plan_raw("user", "alice", "long", params["keep_tokens"]).to_dict())
    answer = service.load_raw("user", "alice", "long", include_archived=True).to_dict()
    answer["archived"] = len(answer["messages"]) - answer["count"]
    return render(answer)


@pytest.mark.parametrize("name", list(PATHS))
def test_a_paged_long_read_is_the_bytes_of_the_whole_read(long_buffer: Api, name: str) -> None:
    path, params = PATHS[name]
    answer = long_buffer.call("GET", path, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.content == _oracle(long_buffer, name)


@pytest.fixture
def held(long_buffer: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each instrumented read materialised at once (store reads, service results)."""
    sizes: list[int] = []

    def watch(owner: Any, name: str, size: Callable[[Any], int]) -> None:
        plain = getattr(owner, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            found = plain(*args, **kwargs)
            sizes.append(size(found))
            return found

        monkeypatch.setattr(owner, name, watched)

    store = long_buffer.store
    for name in ("load", "load_bodies"):
        watch(store, name, len)
    watch(store, "page_bodies", lambda page: len(page.bodies))
    watch(store.archive, "page", lambda page: len(page.bodies))
    watch(store.archive, "read", lambda read: len(read.archived) + len(read.live))
    watch(tail_module, "_rows_of", len)  # a SQL read from the end: one batch, parsed

    def result_rows(result: Any) -> int:
        if isinstance(result, PagedRead):
            return len(result.lead) + (0 if result.first is None else len(result.first.bodies))
        return len(result.messages)

    watch(MemoryService, "load", result_rows)
    watch(MemoryService, "compaction_plan", result_rows)
    return sizes


@pytest.mark.parametrize("name", list(PATHS))
def test_a_long_read_holds_about_a_page_not_the_buffer(long_buffer: Api, held: list[int], name: str) -> None:
    path, params = PATHS[name]
    answer = long_buffer.call("GET", path, params=params)
    assert answer.status_code == 200, answer.text
    assert held and max(held) <= HELD, max(held)  # the buffer holds more than twice that
