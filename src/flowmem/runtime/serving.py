"""The agent ``flowmem serve`` and ``flowmem chat`` run, configured from the environment.

- ``FLOWMEM_MODEL`` (required to run model turns), ``FLOWMEM_MODEL_BASE_URL``,
  ``FLOWMEM_API_KEY``/``OPENAI_API_KEY``: the OpenAI-compatible model.
- ``FLOWMEM_SYSTEM_PROMPT``: the system prompt (a default one otherwise).
- ``FLOWMEM_MEMORY_WINDOW``: the conversation window (0 = unlimited, the default).
- ``FLOWMEM_MAX_STEPS``: model calls per turn (default 8).
- ``FLOWMEM_STALE_AFTER``: seconds before a ``running`` session without a heartbeat
  is released to ``failed`` (default 60).

Without ``FLOWMEM_MODEL`` the server runs no model: a turn only records the user
message (the storage-api profile).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from typing import Any

from flowmem.errors import ConfigurationError
from flowmem.runtime.agent import Agent, MemorySpec
from flowmem.runtime.models import Model, OpenAIChatModel
from flowmem.runtime.runner import DEFAULT_STALE_AFTER, AgentRunner
from flowmem.runtime.tools import ToolContext, ToolRegistry
from flowmem.service import MemoryService
from flowmem.store.base import Store

DEFAULT_AGENT = "assistant"
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. You can remember facts about the user across "
    "conversations with the remember, recall and forget tools."
)
KEY_SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 200}},
    "required": ["key"],
    "additionalProperties": False,
}
REMEMBER_SCHEMA = {
    "type": "object",
    "properties": {
        "key": {"type": "string", "minLength": 1, "maxLength": 200},
        "value": {"type": "string"},
    },
    "required": ["key", "value"],
    "additionalProperties": False,
}


def _user_key(key: str) -> str:
    return f"note:{key}"


def remember(key: str, value: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember a fact about the user (user-scoped memory: the session owner, MEM-8)."""
    node = tool_context.node("memory_write", {"scope": "user"})
    out = node.process({"key": _user_key(key), "value": value}, tool_context.context)
    if not out["success"]:
        return {"remembered": False, "reason": "this session has no owner to remember for"}
    return {"remembered": True, "key": key}


def recall(key: str, tool_context: ToolContext) -> dict[str, Any]:
    """Recall a fact remembered about the user."""
    node = tool_context.node("memory_read", {"scope": "user"})
    out = node.process({"key": _user_key(key)}, tool_context.context)
    return {"found": out["found"], "key": key, "value": out["value"]}


def forget(key: str, tool_context: ToolContext) -> dict[str, Any]:
    """Forget a fact remembered about the user."""
    node = tool_context.node("memory_delete", {"scope": "user"})
    out = node.process({"key": _user_key(key)}, tool_context.context)
    return {"forgotten": bool(out["success"]), "key": key}


def current_time() -> str:
    """The current date and time in UTC (ISO 8601)."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def builtin_tools() -> ToolRegistry:
    """The tools of the default agent: user memory (remember/recall/forget) and the time."""
    registry = ToolRegistry()
    registry.register("remember", remember, REMEMBER_SCHEMA)
    registry.register("recall", recall, KEY_SCHEMA)
    registry.register("forget", forget, KEY_SCHEMA)
    registry.register("current_time", current_time)
    return registry


def _number(env: Mapping[str, str], name: str, default: float, *, integer: bool) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from exc
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0, got {raw!r}")
    return value


def default_agent(model: Model, env: Mapping[str, str] | None = None) -> Agent:
    """The default agent over ``model``, with the built-in tools and the env's settings."""
    env = os.environ if env is None else env
    return Agent(
        DEFAULT_AGENT,
        model,
        env.get("FLOWMEM_SYSTEM_PROMPT") or DEFAULT_SYSTEM_PROMPT,
        builtin_tools(),
        MemorySpec(max_messages=int(_number(env, "FLOWMEM_MEMORY_WINDOW", 0, integer=True))),
        max_steps=max(1, int(_number(env, "FLOWMEM_MAX_STEPS", 8, integer=True))),
    )


def agent_from_env(env: Mapping[str, str] | None = None) -> Agent | None:
    """The default agent on the configured OpenAI-compatible model; None without ``FLOWMEM_MODEL``."""
    env = os.environ if env is None else env
    if not env.get("FLOWMEM_MODEL"):
        return None
    model = OpenAIChatModel(
        env["FLOWMEM_MODEL"], env.get("FLOWMEM_MODEL_BASE_URL"), env.get("FLOWMEM_API_KEY")
    )
    return default_agent(model, env)


def runner_from_env(
    store: Store, service: MemoryService, env: Mapping[str, str] | None = None
) -> AgentRunner | None:
    """The server's runner (None when no model is configured); releases stale sessions first."""
    env = os.environ if env is None else env
    agent = agent_from_env(env)
    if agent is None:
        return None
    stale = _number(env, "FLOWMEM_STALE_AFTER", DEFAULT_STALE_AFTER, integer=False)
    # keep_results=0: no HTTP route asks a runner for a turn's result (clients follow
    # the session status and transcript), so a finished turn's result is dropped at once
    runner = AgentRunner(
        store,
        service,
        [agent],
        default_agent=agent.name,
        stale_after=stale or DEFAULT_STALE_AFTER,
        keep_results=0,
    )
    runner.release_stale()
    return runner
