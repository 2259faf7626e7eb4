"""A pydantic-ai app that saves its progress after every node of ``agent.iter``, for the kill-and-resume test.

``python -m tests.integrations.pydantic_ai.crash_app URL CONVERSATION crash`` runs a turn
whose model calls ``slow``, a tool that prints ``IN-TOOL`` and waits to be killed.
``... resume conversation|history`` loads the conversation and runs a new prompt, with
``conversation=`` or ``message_history=``, saves it and prints ``RESUMED``. (The setup
docs/integrations.md shows, ``store.run``, is the kill matrix's program.)

``forked(argv, out, err)`` runs the same ``main`` as the target of a process forked from a
fork server that imported this module once (``test_crash``: a process then costs its run,
not pydantic-ai's import; decision 0185), its stdout and stderr written to files.
"""

from __future__ import annotations

import asyncio
import sys
import time

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from flowmem.integrations.pydantic_ai import FlowmemConversationStore
from tests.integrations import forkserver


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call ``slow`` on the first prompt; answer every later prompt in text."""
    prompts = [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]
    if len(prompts) == 1:
        return ModelResponse(parts=[ToolCallPart("slow", {"n": 1}, tool_call_id="call-slow")])
    return ModelResponse(parts=[TextPart(f"answered {prompts[-1].content}")])


agent = Agent(FunctionModel(model))


@agent.tool_plain
def slow(n: int) -> str:
    """Block until the test kills the process."""
    print("IN-TOOL", flush=True)
    time.sleep(120)
    return "never"


async def crash(store: FlowmemConversationStore, cid: str) -> None:
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    revision = conversation.revision
    async with agent.iter("first question", conversation=conversation) as run:
        async for _node in run:
            progress = Conversation(
                conversation_id=cid, messages=run.all_messages(), usage=run.usage, revision=revision
            )
            await store.save(progress)
            revision = progress.revision


async def resume(store: FlowmemConversationStore, cid: str, how: str) -> None:
    loaded = await store.load(cid)
    assert loaded is not None
    if how == "conversation":
        result = await agent.run("second question", conversation=loaded)
        await store.save(result)
    else:
        result = await agent.run("second question", message_history=loaded.messages)
        saved = Conversation(
            conversation_id=cid,
            messages=result.all_messages(),
            usage=result.usage,
            revision=loaded.revision,
        )
        await store.save(saved)
    print("RESUMED", result.output, flush=True)


def main(argv: list[str]) -> None:
    """Run the phase ``argv`` names: ``URL CONVERSATION crash`` or ``URL CONVERSATION resume HOW``."""
    url, cid, phase = argv[:3]
    store = FlowmemConversationStore.from_url(url)
    try:
        if phase == "crash":
            asyncio.run(crash(store, cid))
        else:
            asyncio.run(resume(store, cid, argv[3]))
    finally:
        store.close()


def forked(argv: list[str], out: str, err: str) -> None:
    """Run ``main`` in a forked child as ``python -m`` would: stdout and stderr to files, its exit code."""
    forkserver.run_main(main, argv, out, err)


if __name__ == "__main__":
    main(sys.argv[1:])
