"""The kill matrix's LangChain 0.x program: the docs' ``RunnableWithMessageHistory`` tool loop.

``turn`` runs the code block ``docs/integrations.md`` shows for LangChain 0.x as
written, with two swaps: the model (``ChatOpenAI``) becomes ``ScriptedChat``, which
answers by ``script.reply`` and calls the killer's model hooks, and the tool's body
calls the killer's tool hooks (its result, ``script.TOOL_RESULT``, is the doc's). The
control runs the same block on LangChain's own pieces: the plain
``RunnableWithMessageHistory`` over langchain-community's ``FileChatMessageHistory``
(a JSON file per session), since langchain-core's only history is in memory.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool
from pydantic import ConfigDict, Field

import flowmem.service
import flowmem.store  # noqa: F401
from flowmem.integrations.langchain import FlowmemChatMessageHistory
from tests.integrations.kill.harness import CONTROL, FLOWMEM, said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import TOOL, Said, reply
from tests.integrations.kill.warm import warm

warm(  # what a turn would import on first use, once in the fork server
    (
        "langchain_core.messages.block_translators.langchain_v0",
        "langchain_core.tracers.context",
    )
)

with warnings.catch_warnings():  # langchain-community warns that it is being sunset
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.chat_message_histories import FileChatMessageHistory

CONTROL_STORE = (
    "LangChain `RunnableWithMessageHistory` + langchain-community `FileChatMessageHistory`"
)

DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"
OWNER = "ana"

MODEL_SWAP = {
    "from langchain_openai import ChatOpenAI\n": "",
    'ChatOpenAI(model="gpt-4o-mini")': "SCRIPTED_MODEL",
}
"""The model's swap: the scripted model in place of the hosted one."""
TOOL_SWAP = {'    return "18C and sunny"\n': "    return TOOL_WORK(city)\n"}
"""The tool's swap: its body runs the killer's hooks and returns the same result."""
CONTROL_SWAP = {
    'FlowmemChatMessageHistory(memory, session_id=session_id, user_id="ana")': (
        'FileChatMessageHistory(f"{CONTROL_DIR}/{session_id}.json")'
    ),
}
"""The control's swap: a history file instead of flowmem."""


def doc_block(remote: bool = False) -> str:
    """The LangChain 0.x tool-loop block of ``docs/integrations.md`` (with or without a ``Client()``)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    found = [
        b
        for b in blocks
        if "FlowmemChatMessageHistory" in b
        and "bind_tools" in b
        and ".invoke(" in b
        and ("Client()" in b) == remote
    ]
    if len(found) != 1:
        raise LookupError(
            f"docs/integrations.md holds {len(found)} LangChain tool-loop blocks, not 1"
        )
    return found[0]


def swapped(block: str, swaps: dict[str, str]) -> str:
    """``block`` with every swap made; a swap the block no longer holds raises LookupError."""
    for old, new in swaps.items():
        if old not in block:
            raise LookupError(f"the LangChain doc block no longer contains {old!r}")
        block = block.replace(old, new)
    return block


def said(message: BaseMessage) -> Said:
    """A LangChain message as the matrix judges it."""
    if isinstance(message, AIMessage):
        calls = tuple(str(call["id"]) for call in message.tool_calls)
        return Said("assistant", message.text, calls=calls)
    if isinstance(message, ToolMessage):
        return Said("tool", message.text, answers=message.tool_call_id)
    role = {"human": "user", "system": "system"}.get(message.type, message.type)
    return Said(role, message.text)


class ScriptedChat(BaseChatModel):
    """A chat model that answers by ``script.reply`` and calls the killer's model hooks."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    killer: Killer
    requests: list[list[Said]] = Field(default_factory=list)
    """Every request this model was given, as the matrix judges it."""

    @property
    def _llm_type(self) -> str:
        return "kill-matrix-script"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:  # type: ignore[override]
        """The model with its tools bound, as a provider's model binds them (the script knows its one tool)."""
        return self.bind(tools=[getattr(t, "name", t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = [said(m) for m in messages]
        self.requests.append(request)
        call = len(self.requests)
        self.killer.model_start(call)
        answer = reply(request)
        if answer.call_id:
            tool_call = {"id": answer.call_id, "name": TOOL, "args": answer.args}
            message = AIMessage("", tool_calls=[tool_call])
        else:
            message = AIMessage(answer.text)
        self.killer.model_end(call, bool(answer.call_id))
        return ChatResult(generations=[ChatGeneration(message=message)])


def tool_work(killer: Killer) -> Callable[[str], str]:
    """The scripted tool's body: the killer's tool hooks around the doc's result."""

    def work(city: str) -> str:
        return killer.tool()

    return work


@contextmanager
def _quiet() -> Iterator[None]:
    # RunnableWithMessageHistory and BaseChatMessageHistory are deprecated upstream
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the docs' LangChain 0.x program on ``place`` (``harness.Program``)."""
    model = ScriptedChat(killer=killer)
    swaps = {
        **MODEL_SWAP,
        **TOOL_SWAP,
        '"sqlite:///chat.db"': repr(place),
        '"ana-1"': repr(thread),
        '"Weather in Lisbon?"': repr(text),
    }
    if store == CONTROL:
        swaps.update(CONTROL_SWAP)
        swaps['memory = MemoryService(open_store("sqlite:///chat.db"))\n'] = ""
        swaps.pop('"sqlite:///chat.db"')
    elif store != FLOWMEM:
        raise ValueError(f"unknown store {store!r}: {FLOWMEM!r} or {CONTROL!r}")
    block = swapped(doc_block(), swaps)
    if store == CONTROL:  # LangChain's own runnable, whichever the doc shows
        block = block.replace("FlowmemRunnableWithMessageHistory(", "RunnableWithMessageHistory(")
    names: dict[str, Any] = {
        "__name__": "__kill_langchain__",
        "SCRIPTED_MODEL": model,
        "TOOL_WORK": tool_work(killer),
        "CONTROL_DIR": place,
        "RunnableWithMessageHistory": RunnableWithMessageHistory,
        "FileChatMessageHistory": FileChatMessageHistory,
        "tool": tool,
    }
    with _quiet():
        exec(compile(block, str(DOC), "exec"), names)
        if store == CONTROL:
            stored = FileChatMessageHistory(f"{place}/{thread}.json").messages
        else:
            memory = names["memory"]
            history = FlowmemChatMessageHistory(memory, session_id=thread, user_id=OWNER)
            stored = history.raw_messages
            memory.store.close()
    return {
        "requests": [said_list(r) for r in model.requests],
        "stored": said_list([said(m) for m in stored]),
    }
