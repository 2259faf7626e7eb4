"""Decision 0216: portal calls and CPU a request, starlette's test transport against the one-hop one.

Run from the checkout: ``.venv/bin/python bench/results/tt60i_one_hop.py``. Counts each
``BlockingPortal.call`` / ``start_task_soon`` (entries into the app's event loop) a request
makes, then the process's CPU a request (all threads), the two transports interleaved,
5 runs of 200 requests each, the minimum quoted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio.from_thread
from tests.api.helpers import make_tokens
from tests.api.transport import OneHopClient

from flowmem.api import create_app
from flowmem.api.ratelimit import RateLimits
from flowmem.store import open_store

ENTERED = {"call": 0, "start_task_soon": 0}


def _counted(name: str) -> None:
    """Count ``BlockingPortal.<name>`` calls in ``ENTERED``."""
    plain = getattr(anyio.from_thread.BlockingPortal, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        ENTERED[name] += 1
        return plain(self, *args, **kwargs)

    setattr(anyio.from_thread.BlockingPortal, name, counted)


def main() -> None:
    """Print the portal calls and the CPU a request of each transport."""
    store = open_store("memory://")
    alice = {"Authorization": f"Bearer {make_tokens(store)['alice']}"}
    app = create_app(store, rate_limits=RateLimits.off())

    def requests(client: OneHopClient) -> list[tuple[str, Callable[[], Any]]]:
        row = {"messages": {"role": "user", "content": "x"}}
        return [
            ("append", lambda: client.post("/v1/buffers/user/chat", headers=alice, json=row)),
            ("read last 5", lambda: client.get("/v1/buffers/user/chat?last=5", headers=alice)),
            ("health", lambda: client.get("/health")),
        ]

    cpu: dict[tuple[str, bool], list[float]] = {}
    for name in ENTERED:
        _counted(name)
    for plain in (True, False):
        with OneHopClient(app, plain=plain) as client:
            for name in ENTERED:
                ENTERED[name] = 0
            sent = requests(client)
            for _, send in sent:
                send()
            each = {name: count / len(sent) for name, count in ENTERED.items()}
            print("starlette" if plain else "one-hop", "portal entries a request:", each)
    for _ in range(5):
        for plain in (True, False):
            with OneHopClient(app, plain=plain) as client:
                for what, send in requests(client):
                    started = time.process_time()
                    for _ in range(200):
                        send()
                    cpu.setdefault((what, plain), []).append((time.process_time() - started) / 200)
    for what in ("append", "read last 5", "health"):
        plain_ms, one_ms = (min(cpu[what, p]) * 1000 for p in (True, False))
        print(
            f"{what}: starlette {plain_ms:.2f} ms, one-hop {one_ms:.2f} ms of CPU (min of 5 x 200)"
        )


if __name__ == "__main__":
    main()
