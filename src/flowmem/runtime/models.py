"""Models an agent talks to: the ``Model`` protocol, ``ScriptedModel`` and ``OpenAIChatModel``.

A model takes the normalized flat history and the tool declarations and returns a
``ModelReply``: text, tool calls, or both.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from flowmem.core import Message, check_sendable, coerce_content, usable_call_id
from flowmem.errors import ConfigurationError, ModelError
from flowmem.formats import to_openai


@dataclass(frozen=True)
class ToolCall:
    """One call a model asks for: its id, the tool's name and the arguments (dict or raw text)."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)

    def to_entry(self) -> dict[str, Any]:
        """Return the call in flowmem's normalized spelling (``tool_call_id``, ``name``, ``args``)."""
        return {"tool_call_id": self.id, "name": self.name, "args": self.arguments}


@dataclass(frozen=True)
class ModelReply:
    """What a model answered: text content and the tool calls it asks for."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def to_message(self) -> Message:
        """Return the reply as a flat assistant row for the conversation buffer."""
        row: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            row["tool_calls"] = [call.to_entry() for call in self.tool_calls]
        return row


class Model(Protocol):
    """Anything that completes a chat: flat rows and tool declarations in, a reply out."""

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Return the model's reply to ``messages``; raise ``ModelError`` when the provider fails."""
        ...


# --- scripted -----------------------------------------------------------------------


class Crash:
    """A script step that kills the process (``SIGKILL``) or raises, to test crash recovery."""

    def __init__(self, mode: str = "kill") -> None:
        if mode not in ("kill", "raise"):
            raise ConfigurationError(f"crash mode must be 'kill' or 'raise', got {mode!r}")
        self.mode = mode

    def fire(self) -> None:
        """Kill this process with SIGKILL, or raise ``SystemExit`` for an in-process crash."""
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise SystemExit("scripted crash")


def reply_from(value: object) -> ModelReply:
    """Build a ``ModelReply`` from a script value: text, a reply, or a ``{content, tool_calls}`` map."""
    if isinstance(value, ModelReply):
        return value
    if isinstance(value, str):
        return ModelReply(value)
    if isinstance(value, Mapping):
        calls = []
        for index, raw in enumerate(value.get("tool_calls") or []):
            if not isinstance(raw, Mapping):
                raise ConfigurationError(f"scripted tool call #{index} must be a map")
            cid = usable_call_id(raw.get("id", raw.get("tool_call_id")))
            name = raw.get("name")
            if cid is None or not isinstance(name, str):
                raise ConfigurationError(f"scripted tool call #{index} needs an id and a name")
            calls.append(ToolCall(cid, name, raw.get("args", raw.get("arguments", {}))))
        return ModelReply(coerce_content(value.get("content")), tuple(calls))
    raise ConfigurationError(f"cannot use {type(value).__name__} as a scripted reply")


ScriptStep = Any  # str | ModelReply | Mapping | BaseException | Crash | Callable


class ScriptedModel:
    """Replies from a script, one step per call: for tests, the demo and ``chat --scripted``.

    A step is text, a ``ModelReply``, a ``{"content", "tool_calls"}`` map, an exception
    (raised), a ``Crash`` (kills the process), or a callable ``(messages, tools)``
    returning one of those. ``crash_at=N`` crashes on the N-th call (1-based) instead.
    With ``check=True`` the model refuses an unsendable history the way a provider
    does (``ModelError`` with status 400). ``fallback`` answers once the script is done.
    """

    def __init__(
        self,
        script: Iterable[ScriptStep] = (),
        *,
        crash_at: int | None = None,
        crash_mode: str = "kill",
        check: bool = True,
        fallback: ScriptStep | None = None,
    ) -> None:
        self.script = list(script)
        self.crash_at = crash_at
        self.crash = Crash(crash_mode)
        self.check = check
        self.fallback = fallback
        self.calls = 0
        self.requests: list[list[Message]] = []

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Return the next scripted reply (after checking the history, when ``check``)."""
        self.calls += 1
        self.requests.append([dict(m) for m in messages])
        if self.check:
            problems = check_sendable(messages)
            if problems:
                raise ModelError(f"invalid history: {problems[0].message}", status=400)
        if self.crash_at is not None and self.calls == self.crash_at:
            self.crash.fire()
        index = self.calls - 1
        if index < len(self.script):
            step = self.script[index]
        elif self.fallback is not None:
            step = self.fallback
        else:
            raise ModelError("scripted model: the script is exhausted", status=None)
        if callable(step) and not isinstance(step, (Crash, BaseException)):
            step = step(messages, tools)
        if isinstance(step, Crash):
            step.fire()
        if isinstance(step, BaseException):
            raise step
        return reply_from(step)


# --- OpenAI-compatible ----------------------------------------------------------------

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def _provider_message(response: httpx.Response) -> str:
    """Return the provider's error message from an error response (OpenAI-style or not)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return json.dumps(body)[:500]


def _parse_reply(body: object) -> ModelReply:
    """Read ``choices[0].message`` of a chat-completions response into a ``ModelReply``."""
    try:
        message = body["choices"][0]["message"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError("provider response has no choices[0].message") from exc
    if not isinstance(message, Mapping):
        raise ModelError("provider response message is not an object")
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") if isinstance(raw, Mapping) else None
        cid = usable_call_id(raw.get("id")) if isinstance(raw, Mapping) else None
        if cid is None or not isinstance(function, Mapping):
            raise ModelError("provider returned a tool call without an id or function")
        name = function.get("name")
        if not isinstance(name, str):
            raise ModelError("provider returned a tool call without a function name")
        arguments = function.get("arguments", "")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except (json.JSONDecodeError, RecursionError):
            parsed = arguments  # kept as raw text: the tool registry reports it as bad arguments
        calls.append(ToolCall(cid, name, parsed if arguments is not None else {}))
    return ModelReply(coerce_content(message.get("content")), tuple(calls))


class OpenAIChatModel:
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp).

    Configuration comes from the arguments, else the environment:
    ``FLOWMEM_MODEL_BASE_URL`` (default ``https://api.openai.com/v1``), ``FLOWMEM_MODEL``,
    ``FLOWMEM_API_KEY`` or ``OPENAI_API_KEY`` (optional for local servers). 429 and 5xx
    answers and transport errors are retried ``max_retries`` times with exponential
    backoff (``backoff * 2**attempt``, at most ``max_backoff`` seconds, ``Retry-After``
    honoured within that bound); every other failure is a ``ModelError`` carrying the
    provider's message and HTTP status.
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        temperature: float | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model or os.environ.get("FLOWMEM_MODEL") or ""
        if not self.model:
            raise ConfigurationError("no model configured: pass model= or set FLOWMEM_MODEL")
        base = base_url or os.environ.get("FLOWMEM_MODEL_BASE_URL") or "https://api.openai.com/v1"
        self.base_url = base.rstrip("/")
        self.api_key = (
            api_key or os.environ.get("FLOWMEM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        )
        if max_retries < 0 or backoff < 0 or max_backoff < 0 or timeout <= 0:
            raise ConfigurationError("timeout must be > 0; retries and backoff must be >= 0")
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        self._sleep = sleep
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout))
        self.attempts = 0  # requests sent, retries included

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def payload(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """Return the request body: ``messages`` via ``flowmem.formats.to_openai``, and ``tools``."""
        body: dict[str, Any] = {"model": self.model, "messages": to_openai(messages)}
        if tools:
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay = float(self.backoff * (2**attempt))
        if response is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, float(str(response.headers.get("retry-after", ""))))
        return float(min(delay, self.max_backoff))

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """POST the history to ``/chat/completions`` and return the parsed reply."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/chat/completions"
        body = self.payload(messages, tools)
        for attempt in range(self.max_retries + 1):
            self.attempts += 1
            last = attempt == self.max_retries
            try:
                response = self._client.post(url, json=body, headers=headers)
            except httpx.TransportError as exc:
                if last:
                    raise ModelError(f"cannot reach the model provider at {url}: {exc}") from exc
                self._sleep(self._delay(attempt, None))
                continue
            if response.status_code < 400:
                try:
                    return _parse_reply(response.json())
                except ValueError as exc:
                    raise ModelError("provider response is not JSON") from exc
            if response.status_code in RETRY_STATUSES and not last:
                self._sleep(self._delay(attempt, response))
                continue
            raise ModelError(
                f"provider refused the request ({response.status_code}): "
                f"{_provider_message(response)}",
                status=response.status_code,
                provider_message=_provider_message(response),
            )
        raise ModelError("unreachable: retries exhausted")  # pragma: no cover
