"""A local fake OpenAI-compatible chat-completions server for the runtime tests.

It checks every request's history the way a strict provider does and answers 400
with an OpenAI-style error on an unsendable one; otherwise it answers with the next
scripted reply. Every request is recorded. Served by uvicorn in a thread on a free
loopback port (``FakeProvider.start``); the ``fake_provider`` fixture in
``conftest.py`` starts one per test module and resets it per test.

The checker is written here on purpose, independently of ``flowmem.core``: the
runtime's output is judged by a second implementation of the provider's rules.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROLES = ("system", "user", "assistant", "tool")

Reply = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


def provider_violations(messages: object) -> list[str]:
    """Return why a strict OpenAI-compatible provider would reject ``messages`` (empty: accepted).

    Rules: a non-empty list of objects with a known role; system messages only at the
    start; every assistant ``tool_calls`` entry has a unique non-empty id, type
    ``function`` and a function name with string arguments; the tool messages that
    follow an assistant turn answer exactly its calls, each once, before the next
    non-tool message (and before the end of the list); no tool message anywhere else.
    """
    if not isinstance(messages, list) or not messages:
        return ["messages: must be a non-empty array"]
    problems: list[str] = []
    seen_ids: set[str] = set()
    pending: list[str] = []
    pending_at = -1
    seen_non_system = False
    for index, message in enumerate(messages):
        where = f"messages.[{index}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            problems.append(f"{where}: invalid message or role")
            continue
        role = message["role"]
        if role != "tool" and pending:
            problems.append(
                f"messages.[{pending_at}]: An assistant message with 'tool_calls' must be "
                f"followed by tool messages responding to each 'tool_call_id'. "
                f"The following tool_call_ids did not have response messages: {', '.join(pending)}"
            )
            pending = []
        if role == "system":
            if seen_non_system:
                problems.append(f"{where}: system message after a non-system message")
            continue
        seen_non_system = True
        content = message.get("content")
        if role == "tool":
            tid = message.get("tool_call_id")
            if not isinstance(tid, str) or tid not in pending:
                problems.append(
                    f"{where}: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (tool_call_id {tid!r})"
                )
            else:
                pending.remove(tid)
            if not isinstance(content, str):
                problems.append(f"{where}.content: must be a string")
            continue
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            if not isinstance(calls, list):
                problems.append(f"{where}.tool_calls: must be an array")
                continue
            for number, call in enumerate(calls):
                cwhere = f"{where}.tool_calls.[{number}]"
                cid = call.get("id") if isinstance(call, dict) else None
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(cid, str) or not cid:
                    problems.append(f"{cwhere}.id: missing")
                    continue
                if cid in seen_ids:
                    problems.append(f"{cwhere}.id: duplicate tool call id {cid!r}")
                    continue
                if call.get("type") != "function" or not isinstance(function, dict):
                    problems.append(f"{cwhere}: must be a function call")
                elif not isinstance(function.get("name"), str) or not isinstance(
                    function.get("arguments"), str
                ):
                    problems.append(f"{cwhere}.function: needs a name and string arguments")
                seen_ids.add(cid)
                pending.append(cid)
            pending_at = index
            if content is not None and not isinstance(content, str):
                problems.append(f"{where}.content: must be a string or null")
            continue
        if not isinstance(content, str):
            problems.append(f"{where}.content: must be a string")
    if pending:
        problems.append(
            f"messages.[{pending_at}]: tool_call_ids without response messages: "
            f"{', '.join(pending)}"
        )
    return problems


def text(content: str) -> dict[str, Any]:
    """A scripted reply with text only."""
    return {"content": content}


def calls(*items: tuple[str, str, Mapping[str, Any]], content: str = "") -> dict[str, Any]:
    """A scripted reply with tool calls given as ``(id, name, args)``."""
    return {
        "content": content,
        "tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in items],
    }


def failure(status: int, message: str = "scripted failure") -> dict[str, Any]:
    """A scripted HTTP error answer."""
    return {"status": status, "error": message}


@dataclass
class Recorded:
    """One request the fake provider received and what it answered."""

    body: dict[str, Any]
    status: int
    problems: list[str] = field(default_factory=list)
    authorization: str | None = None


class FakeProvider:
    """The fake server: scripted replies, a strict history check, every request recorded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replies: list[Reply] = []
        self.fallback: Reply | None = None
        self.requests: list[Recorded] = []
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.port = 0
        self.app = self._build_app()

    # --- scripting -----------------------------------------------------------------
    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self.lock:
            self.replies = []
            self.fallback = None
            self.requests = []

    def script(self, *replies: Reply, fallback: Reply | None = None) -> None:
        """Queue replies, answered in order; ``fallback`` answers once they run out."""
        with self.lock:
            self.replies.extend(replies)
            if fallback is not None:
                self.fallback = fallback

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL an ``OpenAIChatModel`` points at."""
        return f"http://127.0.0.1:{self.port}/v1"

    def accepted(self) -> list[Recorded]:
        """Requests answered with 200."""
        with self.lock:
            return [r for r in self.requests if r.status == 200]

    def rejected(self) -> list[Recorded]:
        """Requests refused because their history was unsendable."""
        with self.lock:
            return [r for r in self.requests if r.problems]

    # --- the app -------------------------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> Mapping[str, Any] | None:
        with self.lock:
            reply = self.replies.pop(0) if self.replies else self.fallback
        if reply is None:
            return None
        return reply(body) if callable(reply) else reply

    def _record(self, item: Recorded) -> None:
        with self.lock:
            self.requests.append(item)

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> JSONResponse:
            auth = request.headers.get("authorization")
            try:
                body = await request.json()
            except ValueError:
                self._record(Recorded({}, 400, ["body is not JSON"], auth))
                return _error(400, "We could not parse the JSON body of your request.")
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                self._record(Recorded({}, 400, ["no model"], auth))
                return _error(400, "you must provide a model parameter")
            problems = provider_violations(body.get("messages"))
            if problems:
                self._record(Recorded(body, 400, problems, auth))
                return _error(400, "Invalid parameter: " + problems[0], param="messages")
            reply = self._next_reply(body)
            if reply is None:
                self._record(Recorded(body, 500, [], auth))
                return _error(500, "fake provider: no scripted reply left", kind="server_error")
            status = int(reply.get("status", 200))
            self._record(Recorded(body, status, [], auth))
            if status != 200:
                return _error(status, str(reply.get("error", "error")), kind="api_error")
            return JSONResponse(_completion(body, reply))

        return app

    # --- serving -------------------------------------------------------------------
    def start(self) -> FakeProvider:
        """Serve on a free loopback port in a daemon thread; return once it accepts connections."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the fake provider did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Shut the server down and join its thread."""
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)


def _error(
    status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status_code=status,
    )


def _arguments(args: object) -> str:
    import json

    return args if isinstance(args, str) else json.dumps(args)


def _completion(body: dict[str, Any], reply: Mapping[str, Any]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": _arguments(call.get("args", {}))},
        }
        for call in reply.get("tool_calls") or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
