"""The files of flowmem that one HTTP append runs through (not a test).

Starts the app on a real uvicorn server (``flowmem serve``'s HTTP protocol,
``flowmem.api.tcp``) over a fresh SQLite file in a temporary directory, sends
three appends over one keep-alive connection to warm up, then records, with a
profile hook on every thread, each flowmem function called while one more append
goes from the socket to SQL and back. It prints each file with the functions
called in it, then the number of files (docs/architecture.md quotes it).

    .venv/bin/python scripts/append_path.py
"""

from __future__ import annotations

import http.client
import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

import flowmem
from flowmem.api import create_app
from flowmem.api.tcp import PROTOCOL
from flowmem.auth import create_token
from flowmem.store import open_store

SOURCE = Path(flowmem.__file__).parent


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main() -> None:
    """Trace one append on a warm server and print the files it ran through."""
    seen: dict[str, set[str]] = {}
    tracing = False

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if tracing and event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(SOURCE):
                seen.setdefault(str(path.relative_to(SOURCE)), set()).add(frame.f_code.co_name)

    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{directory}/path.db")
        token, _ = create_token(store, "alice", set(), label="append-path")
        config = uvicorn.Config(
            create_app(store), host="127.0.0.1", port=free_port(), http=PROTOCOL, log_level="warning"
        )
        server = uvicorn.Server(config)
        threading.setprofile(profile)  # the server's thread, and every thread it starts
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        connection = http.client.HTTPConnection("127.0.0.1", config.port)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def append(text: str) -> None:
            body = json.dumps({"messages": [{"role": "user", "content": text}]})
            connection.request("POST", "/v1/buffers/user/chat_history", body, headers)
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                raise SystemExit(f"append failed: {response.status} {answer!r}")

        for n in range(3):
            append(f"warm-up {n}")
        tracing = True
        append("traced")
        time.sleep(0.3)  # the group-commit fsync answers in the sync thread
        tracing = False
        connection.close()
        server.should_exit = True
        thread.join(5)
        threading.setprofile(None)
        store.close()
    for name in sorted(seen):
        print(f"{name:24} {', '.join(sorted(seen[name]))}")
    print(f"{len(seen)} files")


if __name__ == "__main__":
    main()
