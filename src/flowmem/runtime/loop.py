"""One agent turn, built from the FlowDrop memory nodes.

record the user message (healing first, MEM-3) → load the window → assemble system
prompt + history (MEM-4) → normalize (MEM-5) → call the model → append the
assistant turn → execute its tool calls → append their results → repeat until the
model answers without calls, the step limit is hit, or a stop is requested.

Every buffer read and write goes through the ``conversation_buffer`` node, so the
buffer rules (MEM-1, 2, 3, 10, 14) and the scope rules (MEM-6, 7, 8, 13) apply
exactly as they do to any workflow. Session status, leases and threads belong to
``AgentRunner``; this module runs the steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from flowmem.core import Message, call_ids, is_healed, result_id, to_row
from flowmem.errors import FlowmemError
from flowmem.results import fields_of
from flowmem.runtime.agent import Agent
from flowmem.runtime.models import ModelReply, ToolCall
from flowmem.runtime.state import RuntimeState
from flowmem.runtime.tools import ToolContext, ToolOutcome
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import memory_context
from flowmem.store.base import SessionRecord, Store

INTERRUPTED_NOT_RERUN = (
    "error: this tool call was interrupted before it returned, in an earlier run; "
    "it is not run again (a call id executes at most once)"
)

@dataclass(frozen=True)
class TurnEvent:
    """Something that happened in a turn, for observers (the chat UI, tests, logs)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


EventSink = Callable[[TurnEvent], None]


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended."""

    turn_id: str
    status: str  # completed | failed
    reason: str  # answered | step_limit | stopped | error
    steps: int = 0
    reply: str = ""
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a plain JSON-able dict."""
        out = fields_of(self)
        if self.error is None:
            del out["error"]
        return out


def tool_node_id(name: str) -> str:
    """Return the node id a tool call runs as in a turn (``tool:<name>``)."""
    return f"tool:{name}"


def turn_context(agent: Agent, session: SessionRecord, turn_id: str) -> ExecutionContext:
    """Return the execution context of a turn on ``session``.

    The session and user come from ``flowmem.sessions.memory_context`` (MEM-8: the
    owner when a real user, nobody otherwise — never the caller who drives the turn;
    the runner is not even told who that is); this adds the turn's workflow and
    execution ids. The turn as a whole runs at no node: each node call of the loop
    names its own (``TurnLoop._at``), so a refusal names it (MEM-7).
    """
    return replace(
        memory_context(session),
        workflow_id=f"agent:{agent.name}",
        execution_id=turn_id,
        metadata={"agent": agent.name, "turn_id": turn_id},
    )


def dangling_ids(rows: list[Message]) -> list[str]:
    """Return the ids declared in ``rows`` that no row answers, in order, each once (O(n))."""
    answered = {rid for row in rows if (rid := result_id(row)) is not None}
    seen: dict[str, None] = {}
    for row in rows:
        for cid in call_ids(row):
            if cid not in answered:
                seen.setdefault(cid, None)
    return list(seen)


class TurnLoop:
    """Runs turns of one agent over a memory service, through the memory nodes."""

    def __init__(
        self,
        agent: Agent,
        service: MemoryService,
        store: Store,
        state: RuntimeState,
        *,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from flowmem.nodes import create_node

        self.agent = agent
        self.service = service
        self.store = store
        self.state = state
        self.on_event = on_event
        self.clock = clock
        self.buffer = create_node("conversation_buffer", service)
        self.assembler = create_node(
            "message_assemble", service, {"inputs": ["system_prompt", "history"]}
        )
        self.normalizer = create_node("conversation_normalize", service)
        self.text = create_node("text_to_message", None)

    # --- small helpers ------------------------------------------------------------
    def _emit(self, kind: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(TurnEvent(kind, data))

    @staticmethod
    def _at(context: ExecutionContext, node_id: str) -> ExecutionContext:
        """Return the turn's context at node ``node_id``.

        Implements MEM-7 for the runtime: a refusal logs the node it happened at — the
        node's type id for the loop's own nodes (``conversation_buffer``), and
        ``tool:<name>`` for whatever a tool runs.
        """
        return replace(context, node_id=node_id)

    def _buffer(self, context: ExecutionContext, **inputs: Any) -> dict[str, Any]:
        """Run the ``conversation_buffer`` node on the agent's buffer with extra ``inputs``."""
        result: dict[str, Any] = self.buffer.process(
            {**self.agent.memory.ports(), **inputs}, self._at(context, self.buffer.type_id)
        )
        return result

    def _history(self, context: ExecutionContext) -> list[Message]:
        """Load the window: a ``user`` role with no content is a pure read of the buffer."""
        return list(self._buffer(context, role="user")["messages"])

    def _transcript(self, session: SessionRecord, row: Message) -> None:
        """Add a row to the session transcript, so API clients polling it see the turn."""
        self.store.add_transcript(session.id, to_row(row, int(self.clock())))

    # --- the turn ----------------------------------------------------------------
    def run(
        self,
        session: SessionRecord,
        content: str,
        turn_id: str,
        stop: threading.Event | None = None,
    ) -> TurnResult:
        """Run one turn for the user's ``content``; model and tool failures end it as failed."""
        event = stop or threading.Event()

        def stopping() -> bool:
            return event.is_set() or self.state.stop_requested(session.id, turn_id)

        context = turn_context(self.agent, session, turn_id)
        steps = 0
        try:
            self._record_user(session, context, content)
            reply = ""
            while True:
                if stopping():
                    return self._end(turn_id, "completed", "stopped", steps, reply)
                if steps >= self.agent.max_steps:
                    return self._end(turn_id, "completed", "step_limit", steps, reply)
                steps += 1
                answer = self._model_step(session, context, steps)
                reply = answer.content
                if not answer.tool_calls:
                    return self._end(turn_id, "completed", "answered", steps, reply)
                for call in answer.tool_calls:
                    if stopping():
                        return self._end(turn_id, "completed", "stopped", steps, reply)
                    self._answer_call(session, context, call)
        except FlowmemError as exc:
            error = {"code": exc.code, "message": exc.message}
            return self._end(turn_id, "failed", "error", steps, "", error)

    def _end(
        self,
        turn_id: str,
        status: str,
        reason: str,
        steps: int,
        reply: str,
        error: dict[str, Any] | None = None,
    ) -> TurnResult:
        result = TurnResult(turn_id, status, reason, steps, reply, error)
        self._emit("done", result=result)
        return result

    def _record_user(self, session: SessionRecord, context: ExecutionContext, content: str) -> None:
        """Append the user message; the buffer heals dangling calls first (MEM-3).

        The text becomes a message through the ``text_to_message`` node (MEM-16).

        Then every healed call whose tool did return before a crash (its result is in
        the call journal but never reached the buffer) gets its real result delivered,
        which replaces the placeholder in place (MEM-10).
        """
        dangling = set(dangling_ids(self._history(context)))
        user = self.text.process({"text": content, "role": "user"}, context)["messages"]
        after = self._buffer(context, message=user, role="user")["messages"]
        healed = [row for row in after if is_healed(row) and result_id(row) in dangling]
        for row in healed:
            self._transcript(session, row)
            self._emit("healed", row=row)
        for row in user:
            self._transcript(session, row)
            self._emit("user", row=row)
        for row in healed:
            call_id = str(result_id(row))
            journal = self.state.call(session.id, call_id)
            if journal is not None and journal.state == "finished":
                outcome = ToolOutcome(journal.content, journal.error)
                call = ToolCall(call_id, journal.name)
                self._deliver(session, context, call, outcome, reused=True, replaces=True)

    def _model_step(
        self, session: SessionRecord, context: ExecutionContext, step: int
    ) -> ModelReply:
        """Assemble (MEM-4) and normalize (MEM-5) the history, ask the model, append its turn.

        The system prompt becomes a message through ``text_to_message`` (MEM-16): an
        empty prompt contributes nothing to the assembly, never a blank system row.
        """
        history = self._history(context)
        system = self.text.process({"text": self.agent.system_prompt, "role": "system"}, context)
        assembled = self.assembler.process(
            {"system_prompt": system["messages"], "history": history}, context
        )
        normalized = self.normalizer.process({"messages": assembled["messages"]}, context)
        messages: list[Message] = list(normalized["messages"])
        self._emit("model_request", step=step, messages=messages)
        answer = self.agent.model.complete(messages, self.agent.tools.specs())
        self._emit("model_reply", step=step, reply=answer)
        row = answer.to_message()
        appended = self._buffer(context, message=row)["appended"]
        if appended:
            self._transcript(session, row)
        self._emit("assistant", row=row, appended=appended)
        return answer

    def _answer_call(
        self, session: SessionRecord, context: ExecutionContext, call: ToolCall
    ) -> None:
        """Answer one tool call, executing its tool at most once per call id.

        A real result already stored is reused (re-delivering it adds nothing, MEM-1);
        a result in the call journal is re-delivered; a call the journal shows started
        but never finished (a crash mid-run) is not run again; otherwise the tool runs,
        journaled before and after.
        """
        stored = next((row for row in self._history(context) if result_id(row) == call.id), None)
        placeholder = stored is not None and is_healed(stored)
        self._emit("tool_call", call=call)
        if stored is not None and not placeholder:
            outcome = ToolOutcome(str(stored.get("content", "")))
            self._deliver(session, context, call, outcome, reused=True, replaces=False)
            return
        journal = self.state.call(session.id, call.id)
        if journal is not None and journal.state == "finished":
            outcome = ToolOutcome(journal.content, journal.error)
            self._deliver(session, context, call, outcome, reused=True, replaces=placeholder)
            return
        if journal is not None:
            if stored is None:
                outcome = ToolOutcome(INTERRUPTED_NOT_RERUN, error=True, code="interrupted")
                self._deliver(session, context, call, outcome, reused=False, replaces=False)
            else:
                self._emit("tool_result", call=call, row=stored, appended=0, reused=True)
            return
        self.state.call_started(session.id, call.id, call.name)
        at = self._at(context, tool_node_id(call.name))
        tool_context = ToolContext(at, self.service, call.id, session.id)
        outcome = self.agent.tools.call(call.name, call.arguments, tool_context)
        self.state.call_finished(session.id, call.id, call.name, outcome.content, outcome.error)
        self._emit("tool_returned", call=call, outcome=outcome)
        self._deliver(session, context, call, outcome, reused=False, replaces=placeholder)

    def _deliver(
        self,
        session: SessionRecord,
        context: ExecutionContext,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        reused: bool,
        replaces: bool,
    ) -> None:
        """Append a tool result through the buffer node; a placeholder is replaced (MEM-10)."""
        metadata: dict[str, Any] = {"tool": call.name} if call.name else {}
        if outcome.error:
            metadata["error"] = outcome.code or "tool_error"
        row: Message = {
            "role": "tool",
            "content": outcome.content,
            "tool_call_id": call.id,
            "metadata": metadata,
        }
        appended = self._buffer(context, message=row)["appended"]
        if appended or replaces:
            self._transcript(session, row)
        self._emit(
            "tool_result", call=call, row=row, appended=appended, reused=reused, replaced=replaces
        )
