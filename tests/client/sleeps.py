"""The client's sleeps recorded instead of slept, for the test's own thread only.

``time.sleep`` and ``asyncio.sleep`` are module globals: patching them reaches every
thread of the worker process, so a thread a previous test left behind (a server, a
pool's worker) would both spin and write its own waits into the record. Calls from any
other thread go to the real functions.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest


def record_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Patch both sleeps so the current thread's waits are recorded, not slept."""
    slept: list[float] = []
    own = threading.get_ident()
    real_sleep, real_async_sleep = time.sleep, asyncio.sleep

    def sleep(seconds: float) -> None:
        if threading.get_ident() != own:
            real_sleep(seconds)
            return
        slept.append(seconds)

    async def async_sleep(seconds: float, result: object = None) -> object:
        if threading.get_ident() != own:
            return await real_async_sleep(seconds, result)
        slept.append(seconds)
        return result

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(asyncio, "sleep", async_sleep)
    return slept
