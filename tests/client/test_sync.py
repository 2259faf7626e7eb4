"""``flowmem.client.sync`` is generated from ``flowmem.client.aio`` (issue 39 §6).

``scripts/async_to_sync.py`` writes it; ``make lint`` runs the script's ``--check``, and
this test does the same check, so a hand edit of either file alone fails.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "scripts" / "async_to_sync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("async_to_sync", module)
    spec.loader.exec_module(module)
    return module


generator = _script()


@pytest.mark.parametrize("source, target", generator.PAIRS, ids=lambda p: p.name)
def test_each_sync_module_is_what_its_async_module_generates(source: Path, target: Path) -> None:
    diff = generator.stale(generator.generate(path=source), target)
    assert diff == "", f"{target.name} is stale: run `{generator.COMMAND}`\n{diff}"


def test_the_methods_are_declared_once_and_inherited_by_both_clients() -> None:
    from flowmem.client.aio import AsyncClient
    from flowmem.client.memory_methods import MemoryMethods
    from flowmem.client.methods import ApiMethods
    from flowmem.client.sync import Client

    for declared in (ApiMethods, MemoryMethods):
        assert issubclass(AsyncClient, declared) and issubclass(Client, declared)
    generated = (generator.CLIENT / "sync.py").read_text(encoding="utf-8")
    assert "def compact(" not in generated and "def append_buffer(" not in generated
    assert [source.name for source, _ in generator.PAIRS] == ["aio.py"]


def test_the_generated_file_says_it_is_generated_and_how_to_regenerate_it() -> None:
    head = generator.TARGET.read_text(encoding="utf-8").splitlines()[:2]
    assert "Generated from src/flowmem/client/aio.py" in head[0]
    assert "python scripts/async_to_sync.py" in head[1]


def test_a_hand_edit_of_sync_py_fails_the_check_with_the_diff(tmp_path: Path) -> None:
    expected = generator.generate()
    edited = tmp_path / "sync.py"
    edited.write_text(expected.replace("time.sleep(step.seconds)", "time.sleep(step.seconds * 2)", 1))
    diff = generator.stale(expected, edited)
    assert "-            time.sleep(step.seconds * 2)" in diff
    assert "+            time.sleep(step.seconds)" in diff
    edited.write_text(expected)
    assert generator.stale(expected, edited) == ""


def test_async_and_await_are_dropped_and_names_renamed_keeping_comments_and_layout() -> None:
    source = textwrap.dedent('''\
        import asyncio


        class AsyncThing:
            """Use ``AsyncThing``? No: ``AsyncClient`` in an ``async with``; AsyncClient stays."""

            async def __aenter__(self) -> AsyncClient:  # see ``AsyncMemory``
                async with self.lock:
                    async for item in self.items:
                        await asyncio.sleep(
                            await self.wait(item),  # layout kept
                        )
                return await self._http.aclose()
        ''')
    assert generator.translate(source) == textwrap.dedent('''\
        import time


        class AsyncThing:
            """Use ``AsyncThing``? No: ``Client`` in an ``with``; AsyncClient stays."""

            def __enter__(self) -> Client:  # see ``Memory``
                with self.lock:
                    for item in self.items:
                        time.sleep(
                            self.wait(item),  # layout kept
                        )
                return self._http.close()
        ''')


def test_a_marked_statement_is_left_out_or_replaced_with_its_block() -> None:
    source = textwrap.dedent("""\
        async def f(items):
            # async only
            if await ready():
                await prepare()
            # sync: yield from items
            # sync: done()
            for item in items:
                yield item
            return 1
        """)
    assert generator.translate(source) == textwrap.dedent("""\
        def f(items):
            yield from items
            done()
            return 1
        """)


@pytest.mark.parametrize(
    "markers",
    ["# async only\n\nx = 1\n", "# async only\n# sync: y = 2\nx = 1\n", "x = 1\n# sync: y = 2\n"],
)
def test_a_marker_not_just_above_a_statement_or_both_kinds_at_once_is_refused(markers: str) -> None:
    with pytest.raises(ValueError, match="marker must stand just above a statement"):
        generator.translate(markers)
