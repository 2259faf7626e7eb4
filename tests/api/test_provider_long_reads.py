"""Provider-format long reads hold a page per reader (issue 38 §2, decision 0113): a window, a repaired read.

A token window in a provider format (``?max_tokens=&format=``) and a provider read
whose stored rows normalization must repair (MEM-5: late results, orphans, a call
declared twice, an empty turn, system rows mid-buffer) are answered page by page
from one snapshot, on memory, SQLite and PostgreSQL. Oracles: the whole window built
as before (``routes.memory._window_answer`` over ``MemoryService.load_window_raw``)
and the whole read normalized at once (``routes.memory._converted`` over every row).
How much a reader holds is judged by instrumenting the store's page reads and the
whole-list normalization: the most rows any one of them took.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from flowmem.api.routes import memory as memory_routes
from flowmem.core import AppendOutcome
from flowmem.formats import FIRST_ROLE
from flowmem.results import BufferText
from flowmem.service import MemoryService
from flowmem.store import sqlbase
from flowmem.store.base import PAGE_ROWS, TAIL_BATCH_MAX
from tests.api.helpers import Api
from tests.api.test_long_reads import _rows

FORMATS = ("openai", "responses", "anthropic", "gemini")
HELD = max(PAGE_ROWS, TAIL_BATCH_MAX)
ROWS = 2600


def _call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _damaged(count: int) -> list[dict[str, Any]]:
    """Rows normalization repairs, spread over pages: late results, orphans, twice-declared calls, empty turns."""
    rows: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": "first", "content": "orphan first"}]
    for n in range(count):
        if n % 11 == 1:
            rows.append({"role": "assistant", "content": "", "tool_calls": [_call(f"c{n}"), _call(f"d{n}")]})
            rows.append({"role": "tool", "tool_call_id": f"d{n}", "content": f"d{n} in its run"})
        elif n % 11 == 5 and n > 700:  # the result of a call 700 rows (pages) before: late
            rows.append({"role": "tool", "tool_call_id": f"c{n - 708}", "content": f"late c{n - 708}"})
        elif n % 53 == 7:
            rows.append({"role": "assistant", "content": "again", "tool_calls": [_call(f"c{n - 6}")]})
        elif n % 61 == 8:
            rows.append({"role": "assistant", "content": ""})
        elif n % 97 == 9:
            rows.append({"role": "system", "content": f"rule {n}"})
        elif n % 89 == 10:
            rows.append({"role": "tool", "tool_call_id": f"nobody{n}", "content": "orphan"})
        else:
            rows.append({"role": "user" if n % 2 else "assistant", "content": f"m{n} " + "x" * (n % 200)})
    return rows


def _as_given(editor: Any, rows: Iterable[Any], max_messages: int = 0) -> AppendOutcome:
    """An append that stores rows as given: a buffer written around the append rules (an older version's)."""
    for row in rows:
        editor.append_row(row)
    return AppendOutcome(appended=editor.count(), count=editor.count())


@pytest.fixture(scope="module")
def buffers(module_any_api: Api) -> Api:
    """``long``: stored rows as appended; ``damaged``: rows normalization repairs, stored as given.

    Filled once per backend and module (5,200 rows, ~0.5 s of CPU): the tests only read them.
    """
    any_api = module_any_api
    for start in range(0, ROWS, 1000):
        rows = _rows(start, min(1000, ROWS - start))
        answer = any_api.call("POST", "/v1/buffers/user/long", json={"messages": rows})
        assert answer.status_code == 200, answer.text
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlbase, "apply_append", _as_given)
        try:
            from flowmem.store.postgres import store as postgres_store
        except ImportError:  # pragma: no cover - the extra is installed in the tests' venv
            pass
        else:
            patch.setattr(postgres_store, "apply_append", _as_given)
        rows = _damaged(ROWS)
        for start in range(0, len(rows), 1000):
            answer = any_api.call("POST", "/v1/buffers/user/damaged", json={"messages": rows[start : start + 1000]})
            assert answer.status_code == 200, answer.text
    return any_api


def _window_oracle(api: Api, key: str, budget: int, fmt: str) -> bytes:
    """The whole window in format ``fmt``, built as before the pages (``_window_answer``)."""
    service = MemoryService(api.store)
    result = service.load_window_raw("user", "alice", key, budget, first_role=FIRST_ROLE.get(fmt))
    return bytes(memory_routes._window_answer(fmt, result).body)


def _read_oracle(api: Api, key: str, fmt: str) -> bytes:
    """The whole read in format ``fmt``: every row normalized at once (``_converted``)."""
    loaded = MemoryService(api.store).load_raw("user", "alice", key)
    bodies = [json.dumps(row, ensure_ascii=False) for row in loaded.messages]
    return memory_routes.render(memory_routes._converted(BufferText(bodies, loaded.count, None, "alice"), fmt))


@pytest.mark.parametrize("fmt", FORMATS)
def test_mem_5_a_provider_window_page_by_page_is_the_whole_windows_bytes(buffers: Api, fmt: str) -> None:
    for key in ("long", "damaged"):
        for budget in (10**9, 20_000):
            answer = buffers.call("GET", f"/v1/buffers/user/{key}", params={"max_tokens": budget, "format": fmt})
            assert answer.status_code == 200, answer.text
            assert answer.content == _window_oracle(buffers, key, budget, fmt), (key, budget)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mem_5_a_read_normalization_repairs_page_by_page_is_the_whole_reads_bytes(buffers: Api, fmt: str) -> None:
    answer = buffers.call("GET", "/v1/buffers/user/damaged", params={"format": fmt})
    assert answer.status_code == 200, answer.text
    assert answer.content == _read_oracle(buffers, "damaged", fmt)
    found = answer.json()
    assert found["dropped"] > 20  # orphans, twice-declared calls, empty turns
    if fmt == "openai":  # a late result moved back to its call's turn
        messages = found["messages"]
        at = next(n for n, m in enumerate(messages) if m.get("tool_calls") and m["tool_calls"][0]["id"] == "c12")
        assert [m["tool_call_id"] for m in messages[at + 1 : at + 3]] == ["d12", "c12"]  # the run, then the late one
        assert messages[at + 2]["content"] == "late c12"


@pytest.fixture
def held(buffers: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each instrumented read took at once: store reads, whole-list normalizations."""
    sizes: list[int] = []

    def watch(owner: Any, name: str, size: Callable[[Any], int]) -> None:
        plain = getattr(owner, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            found = plain(*args, **kwargs)
            sizes.append(size(found) if name != "normalize" else len(args[0]))
            return found

        monkeypatch.setattr(owner, name, watched)

    store = buffers.store
    for name in ("load", "load_bodies"):
        watch(store, name, len)
    watch(store, "page_bodies", lambda page: len(page.bodies))
    watch(memory_routes, "normalize", len)
    watch(MemoryService, "load", lambda result: len(getattr(result, "messages", None) or getattr(result, "lead", [])))
    return sizes


@pytest.mark.parametrize(
    "params",
    [
        {"key": "long", "max_tokens": 10**9, "format": "anthropic"},
        {"key": "damaged", "max_tokens": 10**9, "format": "gemini"},
        {"key": "damaged", "format": "openai"},
        {"key": "damaged", "format": "anthropic"},
    ],
    ids=["window", "window_repaired", "repaired_openai", "repaired_anthropic"],
)
def test_a_provider_long_read_holds_about_a_page_not_the_buffer(held: list[int], buffers: Api, params: dict[str, Any]) -> None:
    query = dict(params)
    key = query.pop("key")
    answer = buffers.call("GET", f"/v1/buffers/user/{key}", params=query)
    assert answer.status_code == 200, answer.text
    assert held and max(held) <= HELD, max(held)  # the buffer holds more than twice that
