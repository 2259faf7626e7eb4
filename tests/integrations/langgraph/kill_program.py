"""The kill matrix's LangGraph programs: a code block of docs/integrations.md, run for one turn.

Each program module (``tests/integrations/kill/programs/langgraph_*.py``) names its doc
block; ``run_turn`` takes that block as the doc shows it and swaps only what a test
must: the hosted model for ``KillerModel`` (``script.reply`` decides, the ``Killer``
kills), the tool's body for the scripted tool, the database, thread and question for
the round's. The control run (``CONTROL``) is the same block with LangGraph's own
``SqliteSaver`` and without flowmem (no healing, no write-ahead): LangGraph alone.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import PrivateAttr

from flowmem.integrations.langgraph import FlowmemSaver
from tests.integrations.kill.harness import CONTROL, FLOWMEM, said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import TOOL, Said, reply

# What a turn would import lazily, imported once in the fork server instead of per child.
for _lazy in (
    "ctypes.util",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
):
    importlib.import_module(_lazy)

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
OWNER = "ana"
DOC_DB = '"sqlite:///app.db"'
DOC_TOOL = '''@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return "18C and sunny"
'''
"""The tool every LangGraph program of the doc defines; swapped for ``scripted_tool``."""
MODEL_IMPORT = "from langchain_openai import ChatOpenAI\n"
MODEL = 'ChatOpenAI(model="gpt-4o-mini")'


def doc_block(*needles: str) -> str:
    """The one ```python block of docs/integrations.md holding every needle."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if all(n in b for n in needles)]
    if len(found) != 1:
        raise LookupError(f"docs/integrations.md has {len(found)} blocks holding {needles}")
    return found[0]


def said(message: BaseMessage) -> Said:
    """A LangChain message as the matrix judges it."""
    role = {"human": "user", "ai": "assistant", "tool": "tool"}.get(message.type, message.type)
    text = message.content if isinstance(message.content, str) else str(message.content)
    calls = tuple(c["id"] for c in getattr(message, "tool_calls", None) or () if c.get("id"))
    return Said(role, text, calls, getattr(message, "tool_call_id", None))


class KillerModel(BaseChatModel):
    """A chat model whose answer is ``script.reply``'s, calling the killer around it."""

    killer: Any
    _requests: list[list[Said]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "kill-matrix-scripted"

    @property
    def requests(self) -> list[list[Said]]:
        """Every request this model was given in this process, in order."""
        return self._requests

    def bind_tools(self, tools: Any, **kwargs: Any) -> KillerModel:
        """Any tools: the answers are scripted."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        history = [said(m) for m in messages if m.type != "system"]
        self._requests.append(history)
        number = len(self._requests)
        self.killer.model_start(number)
        answer = reply(history)
        calls = []
        if answer.call_id:
            calls = [{"name": TOOL, "args": answer.args, "id": answer.call_id, "type": "tool_call"}]
        message = AIMessage(content=answer.text, tool_calls=calls)
        self.killer.model_end(number, bool(answer.call_id))
        return ChatResult(generations=[ChatGeneration(message=message)])


def scripted_tool(killer: Killer) -> Any:
    """The matrix's tool: ``script.TOOL``, working ``TOOL_WORK_SECONDS``, the killer's hooks."""

    @tool(TOOL)
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return killer.tool()

    return weather


def program(
    block: str,
    store: str,
    place: str,
    thread: str,
    text: str,
    doc_thread: str,
    doc_question: str,
    control_swaps: dict[str, str],
) -> str:
    """The doc block with the round's swaps (``control_swaps`` too for the control)."""
    swaps = {
        MODEL_IMPORT: "",
        MODEL: "SCRIPTED_MODEL",
        DOC_TOOL: "weather = SCRIPTED_TOOL\n",
        f'"{doc_thread}"': repr(thread),
        f'"{doc_question}"': repr(text),
    }
    if store == CONTROL:
        swaps = {**swaps, **control_swaps}
        swaps[DOC_DB] = repr(str(Path(place) / "control.db"))
    elif store == FLOWMEM:
        swaps[DOC_DB] = repr(place)
    else:
        raise ValueError(f"store must be {FLOWMEM!r} or {CONTROL!r}, got {store!r}")
    for old, new in swaps.items():
        if old not in block:
            raise LookupError(f"the doc block no longer contains {old!r}")
        block = block.replace(old, new)
    return block


def stored_messages(store: str, place: str, thread: str) -> list[BaseMessage]:
    """The thread's messages as stored, read back raw by a new saver (placeholders included)."""
    config: Any = {"configurable": {"thread_id": thread, "user_id": OWNER}}
    opener = (
        FlowmemSaver.from_conn_string(place)
        if store == FLOWMEM
        else SqliteSaver.from_conn_string(str(Path(place) / "control.db"))
    )
    with opener as saver:
        found = saver.get_tuple(config)
    return [] if found is None else list(found.checkpoint["channel_values"].get("messages", []))


def run_turn(
    block: str,
    store: str,
    place: str,
    thread: str,
    text: str,
    killer: Killer,
    doc_thread: str,
    doc_question: str,
    control_swaps: dict[str, str],
) -> dict[str, Any]:
    """One turn of a doc block; the harness's report (``harness.Program.turn``)."""
    model = KillerModel(killer=killer)
    code = program(block, store, place, thread, text, doc_thread, doc_question, control_swaps)
    namespace: dict[str, Any] = {"SCRIPTED_MODEL": model, "SCRIPTED_TOOL": scripted_tool(killer)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent moved
        exec(compile(code, str(DOC), "exec"), namespace)
    return {
        "requests": [said_list(r) for r in model.requests],
        "stored": said_list([said(m) for m in stored_messages(store, place, thread)]),
    }


def messages_said(messages: Sequence[BaseMessage]) -> list[Said]:
    """Messages as the matrix judges them."""
    return [said(m) for m in messages]
