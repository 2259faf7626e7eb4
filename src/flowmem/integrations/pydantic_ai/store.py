"""``FlowmemConversationStore``: a pydantic-ai ``ConversationStore`` whose conversations are sessions.

- **A conversation is a session** (DESIGN.md §5, decision 0051). Its first save creates
  the session, owned by the conversation's ``scope`` (a usable flowmem user id; None:
  owned by nobody, MEM-9). A conversation id that is not a usable session id refuses as
  MEM-13 says: a read finds nothing, a write raises ``ScopeRefusedError``; storage is not
  touched and one WARNING is logged. ``delete`` deletes the session; session delete and
  ``flowmem user erase`` delete the conversation, entries included; a deleted
  conversation's id stays deleted (decision 0042).
- **What a run saves passes the buffer rules**: a tool result saved again is stored once
  (MEM-1), a model response delivered again once (MEM-2), and a user prompt heals the
  calls left unanswered (MEM-3), except those a paused run waits on (deferred). A call id
  a later run repeats is a new call (decision 0051).
- **Loading is one query** for the record and one for its history (``read_history``).
  A loaded conversation whose last response declared calls nothing answered, and that
  is not waiting on them, comes back with MEM-3's placeholder appended, unsaved, so a new
  prompt can follow it (pydantic-ai refuses one after an unanswered call); the next save
  stores it.

- **Write-ahead** (DESIGN.md §5, decision 0099): ``run(agent, prompt, conversation=…,
  scope=…)`` runs the agent with a ``WriteAhead`` capability (``write_ahead``) that
  stores the run's new messages before each model request and before each tool, then
  saves the result; the save stores only what was not written ahead. A save that
  stores a tool call together with its result (the tool ran before its call was
  stored) logs one WARNING per store naming this fix.
- **Built for a user** (``context=ExecutionContext(user_id=…)``, decision 0109): a
  ``scope`` left out is that user; one naming another user raises ``AccessDeniedError``
  (MEM-9) before anything is read or written; ``read_record`` finds only conversations
  that user may view, ``delete_record`` deletes only its own. A store built for no
  user keeps pydantic-ai's contract: no ``scope``, every conversation (an operator's).
- **pydantic-ai's exceptions**: a conversation id whose session another owner holds
  raises ``ConversationOwnedElsewhere``, a ``ConversationConflict`` that is also
  flowmem's ``AccessDeniedError``.

Writes run in a worker thread, a conversation's one at a time in the order made
(``InOrder``, decision 0156): a save whose run was cancelled while it was stored ends
before the conversation's next write, and a read made meanwhile waits for it; one
cancelled before its turn is never made; one refused with no caller left is logged at
ERROR. Reads of a local store (SQLite, memory) run on the caller's event loop, in a
thread only when they would wait for a lock, and every read of PostgreSQL in a thread
(``flowmem.service.local_reads``, decision 0140).
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ToolCallPart,
)
from pydantic_ai.run import AgentRunResult
from pydantic_ai.usage import RunUsage

from flowmem.errors import AccessDeniedError, InvalidInputError
from flowmem.integrations.copies import Made
from flowmem.integrations.in_order import Queues
from flowmem.integrations.pydantic_ai.ahead import Ahead, WriteAhead
from flowmem.integrations.pydantic_ai.answers import carries_results, once_per_call
from flowmem.integrations.pydantic_ai.rows import (
    entries_from,
    entries_of,
    is_result,
    messages_of,
    placeholder_request,
    unanswered_tail,
)
from flowmem.integrations.pydantic_ai.turns import LOADING, SAVING, KnownRecords, Loading, Saving
from flowmem.integrations.pydantic_ai.validated import Validated
from flowmem.integrations.pydantic_ai.writes import (
    Read,
    check_entry_ids,
    continued,
    conversation_write,
    deferred_ids,
    ran_before_stored,
    record_of,
)
from flowmem.integrations.refusals import usable_session
from flowmem.scope import ExecutionContext, Refusal, usable_identity
from flowmem.service import MemoryService, kinds
from flowmem.service.checks import check_id_text, check_name, context_user
from flowmem.service.local_reads import local_read
from flowmem.service.session_access import judge_session
from flowmem.store import Store, WriteGuard, open_store
from flowmem.store.conversations import LINE, ConversationWrite, LineState, StoredConversation

T = TypeVar("T")
log = logging.getLogger("flowmem.integrations.pydantic_ai")
_CONTINUING: contextvars.ContextVar[Ahead | None] = contextvars.ContextVar("_CONTINUING", default=None)
"""The write-ahead a run's own save continues (set by ``save`` around pydantic-ai's save)."""



class _Unread:
    """A history's messages not read yet (``_entries`` reads them)."""


UNREAD = _Unread()


class ConversationOwnedElsewhere(ConversationConflict, AccessDeniedError):
    """The conversation id is a session another owner holds (MEM-9): pydantic-ai's conflict, flowmem's denial."""

    def __init__(self, conversation_id: str, denied: AccessDeniedError) -> None:
        ConversationConflict.__init__(
            self,
            conversation_id,
            message=f"Conversation {conversation_id!r} is a flowmem session another owner holds "
            f"({denied.message}); nothing was stored. Use another conversation id, or the "
            "owner's scope.",
        )
        self.message = str(self)
        self.details = dict(denied.details)
        self.rule = denied.rule


def _answers_stored(entries: Sequence[ConversationEntry]) -> bool:
    """Whether a result in ``entries`` may answer a stored call: one no earlier entry of them declares.

    Only then does ``once_per_call`` need the stored history: a call declared in the
    entries is new (decision 0051), whatever the history says of its id.
    """
    declared: set[str] = set()
    for entry in entries:
        message: ModelMessage = entry.message
        if isinstance(message, ModelResponse):
            declared.update(p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart))
        elif any(is_result(p) and p.tool_call_id not in declared for p in message.parts):
            return True
    return False


class FlowmemConversationStore(ConversationStore):
    """pydantic-ai conversations in flowmem: records beside the sessions, entries as buffer rows."""

    copies_while_writing = True
    """The seam of decision 0170: a save's kept copy (``Validated.made``: what it validated,
    planned) is made on the caller's thread while the write runs in its worker, then kept
    once the write is stored; False, the plain path: made and kept after the write."""

    skips_proven_texts = True
    """The seam of decision 0183: a load whose history is kept with the state its line is
    in now (``LineState``: the line's buffer unchanged since its texts were read, or since
    this store's save appended to them) copies the kept history without reading the
    texts; a save that appends to such a line keeps the state it leaves. False, the
    plain path: every load reads the texts and compares them with the kept ones."""

    def __init__(
        self, memory: MemoryService, *, owns: Store | None = None, context: ExecutionContext | None = None
    ) -> None:
        """``memory``: the service; ``owns``: a store to close with this one; ``context`` with a
        ``user_id``: act only as that user (its ids checked as the API's)."""
        self.user = context_user(context, "FlowmemConversationStore")
        if not isinstance(memory, MemoryService):
            raise TypeError(
                "FlowmemConversationStore needs a flowmem.service.MemoryService, got "
                f"{type(memory).__name__} (it stores conversations beside the database)"
            )
        self.memory = memory
        self.tables = kinds.conversations(memory)
        self._owns = owns
        self._aheads: dict[str, Ahead] = {}
        self._warned = False
        self._known = KnownRecords()
        self._validated = Validated()
        self._queues = Queues()  # per conversation: its writes, one at a time in the order made

    @classmethod
    def from_url(cls, url: str, *, context: ExecutionContext | None = None) -> FlowmemConversationStore:
        """A store on the flowmem database at ``url`` (``sqlite:///app.db``, ``postgresql://…``).

        It owns the database connection: ``close()`` it when done.
        """
        context_user(context, "FlowmemConversationStore")  # before the database is opened
        store = open_store(url)
        return cls(MemoryService(store), owns=store, context=context)

    def close(self) -> None:
        """Close the database this store opened (``from_url``); a no-op otherwise."""
        if self._owns is not None:
            self._owns.close()
            self._owns = None

    # --- sessions and owners ---------------------------------------------------------------
    def _session(self, conversation_id: str, operation: str) -> str | Refusal:
        check_id_text(conversation_id, "conversation_id")  # as the API checks ids
        context = ExecutionContext(session_id=conversation_id)
        return self.memory.resolve(operation, "session", LINE, context)

    def _writable(self, conversation_id: str, operation: str) -> str:
        found = self._session(conversation_id, operation)
        return usable_session(found, f"pydantic-ai {operation}", "conversation", "conversation_id")

    def _scoped(self, scope: str | None, operation: str) -> str | None:
        """The scope a call acts in: a user-bound store's user for None; AccessDeniedError for another user."""
        if self.user is None:
            return scope
        if scope is None:
            return self.user
        if usable_identity(scope) != self.user:
            raise AccessDeniedError(
                f"pydantic-ai {operation} refused: scope {scope!r} is another user's, this store "
                f"is user {self.user!r}'s (its context); nothing was read or changed",
                rule="MEM-9",
                argument="scope",
            )
        return self.user

    def _may(self, conversation_id: str, action: str) -> bool:
        """Whether a user-bound store may ``action`` the conversation's session (True for a store of no user)."""
        return self.user is None or judge_session(self.memory, conversation_id, self.user, action).allowed

    @staticmethod
    def _owner(scope: str | None) -> str | None:
        if scope is None:
            return None
        if usable_identity(scope) != scope:
            raise InvalidInputError(
                f"a conversation's scope is its owner, a flowmem user id; {scope!r} is not a "
                "usable one (1-255 characters, no whitespace): pass a user id or no scope",
                argument="scope",
            )
        return scope

    # --- the five primitives -----------------------------------------------------------------
    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The record of a conversation, or None (also for an id MEM-13 refuses)."""
        sid = self._session(conversation_id, "conversation read")
        if isinstance(sid, Refusal):
            return None
        if self.user is not None and not await local_read(self.memory, self._may, conversation_id, "view"):
            return None  # another user's: a store built for a user does not have it
        saving = SAVING.get()
        if saving is not None and saving.conversation_id != conversation_id:
            saving = None
        stored = None if saving is None else self._known.at(conversation_id, saving.revision)
        if stored is None:  # not the record the saved conversation was loaded at: read it
            stored = await self._read_in_turn(sid, self._stored, conversation_id, LOADING.get())
        if saving is not None:
            saving.stored, saving.read = stored, True
        if stored is None:
            return None
        record = record_of(stored)
        ahead = _CONTINUING.get()
        if ahead is not None and ahead.conversation_id == conversation_id and ahead.revision == record.revision:
            # the run's own save, after its write-ahead: pydantic-ai checks it against the
            # revision the run was loaded at (decision 0099); write_record moves it on
            return None if ahead.base is None else dataclasses.replace(record, revision=ahead.base)
        return record

    def _stored(self, conversation_id: str, loading: Loading | None) -> StoredConversation | None:
        """The stored record; during a ``load``, its history too, kept in ``loading`` for ``read_history``.

        A load of a store built for no user reads the record and its history's messages
        in one read (``Conversations.loaded``, decision 0176); ``_entries`` would read
        those messages the same way, on a connection of its own.
        """
        messages: list[tuple[str, str]] | _Unread | None = UNREAD
        state: LineState | None = None
        if loading is None or self.user is not None or loading.limit == 0:
            stored = self.tables.get(conversation_id)
        elif loading.limit is None and self.skips_proven_texts:  # decision 0183
            proves = self._validated.proves
            stored, messages, state = self.tables.loaded_held(conversation_id, proves)
        else:
            stored, messages = self.tables.loaded(conversation_id, loading.limit)
        self._known.remember(conversation_id, stored)
        head = None if stored is None else stored.record.get("head_id")
        if loading is not None and isinstance(head, str):
            loading.head = head
            loading.entries = self._entries(head, loading.limit, messages, state)
        return stored

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The records, those of ``scope`` when given, newest ``updated_at`` first.

        A store built for a user lists that user's records only.
        """
        check_id_text(scope, "scope")
        scope = self._scoped(scope, "conversation list")
        stored = await local_read(self.memory, self.tables.records, scope, limit)
        return [record_of(found) for found in stored]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store a record and its new entries in one transaction; ConversationConflict when stale.

        Implements MEM-1, MEM-2 and MEM-3 for what a run saves, through the buffer rules
        (``flowmem.store.conversations.lines.write_lines``).
        """
        cid = self._writable(record.conversation_id, "conversation write")
        if self.user is not None:  # a user-bound store's conversations are its user's
            record = dataclasses.replace(record, scope=self._scoped(record.scope, "conversation write"))
        entries = list(new_entries)
        check_entry_ids(record, entries)
        stored = await self._stored_for_write(cid)
        ahead = _CONTINUING.get()
        if ahead is not None and (ahead.conversation_id != cid or expected_revision != ahead.base):
            ahead = None
        if ahead is not None:
            entries, record = continued(ahead, record, entries, stored)
            expected_revision = ahead.revision
        elif answered := ran_before_stored(entries):
            self._warn_once(answered)
        if carries_results(entries):
            entries, record = await self._once_per_call(entries, record)
        if ahead is not None:
            ahead.saved = entries
        guard = self._claim(cid, record)
        read: list[Read] = []
        write = conversation_write(cid, record, entries, stored, read)
        parent = entries[0].parent_id if entries else None
        # the state of the line the kept history before them was read at (decision 0183)
        held = self._held(parent) if entries and self.skips_proven_texts else None
        # what the save validated: the next load copies it (decision 0145)
        if self.copies_while_writing:  # its copy made while the write runs (decision 0170)
            named = record.conversation_id
            made, after = await self._write(
                write, expected_revision, guard, named, lambda: self._made(parent, read), held
            )
            self._validated.extend_by(parent, made, held, after)
        else:
            await self._write(write, expected_revision, guard, record.conversation_id)
            if entries:
                self._validated.extend(parent, read)

    def _held(self, parent: str | None) -> LineState | None:
        """The line state the kept history ending at ``parent`` is proven by, if any (decision 0183)."""
        proof = self._validated.proof_at(parent)
        return proof if isinstance(proof, LineState) else None

    def _made(self, parent: str | None, read: list[Read]) -> Made | None:
        """The kept copy of what a save validated, made while its write runs (``Validated.made``)."""
        return self._validated.made(read) if read and self._validated.keeps(parent) else None

    async def _stored_for_write(self, conversation_id: str) -> StoredConversation | None:
        """The stored record a write replaces: the one this save's ``read_record`` gave, else read."""
        saving = SAVING.get()
        if saving is not None and saving.conversation_id == conversation_id and saving.read:
            return saving.stored
        return await self._read_in_turn(conversation_id, self.tables.get, conversation_id)

    async def _read_in_turn(self, conversation_id: str, read: Callable[..., T], *args: Any) -> T:
        """``local_read``, or in the conversation's turn while a write of it waits or runs."""
        if self._queues.busy(conversation_id):
            result: T = await self._queues.of(conversation_id).run(read, *args)
            return result
        return await local_read(self.memory, read, *args)

    def _claim(self, conversation_id: str, record: ConversationRecord) -> WriteGuard | None:
        """The guard of the write, for the record's scope as owner; ConversationOwnedElsewhere (MEM-9)."""
        owner = self._owner(record.scope)
        try:
            context = ExecutionContext(session_id=conversation_id, user_id=owner)
            return self.memory.session_claim(conversation_id, context)
        except AccessDeniedError as exc:
            raise ConversationOwnedElsewhere(record.conversation_id, exc) from exc

    async def _write(
        self,
        write: ConversationWrite,
        expected_revision: str | None,
        guard: WriteGuard | None,
        named: str,
        alongside: Callable[[], T] | None = None,
        held: LineState | None = None,
    ) -> tuple[T | None, LineState | None]:
        """Store ``write`` in one transaction, in the conversation's turn; ConversationConflict when stale.

        ``alongside``: called here once the write is queued, while it runs in its
        worker thread; its result returned once the write is stored (None without it),
        with the line state the write left when ``held`` was its line's before (decision 0183).
        """
        cid = write.record.conversation_id
        what = f"pydantic-ai write of conversation {named!r} ({len(write.entries)} new entries)"
        made: T | None = None
        try:
            answer = self._queues.of(cid).queued(
                what, self._write_now, write, expected_revision, guard, named, held
            )
            try:
                made = None if alongside is None else alongside()
            finally:
                after = await answer  # the write's caller from here on (a cancellation, a refusal)
        except ConversationConflict:
            self._known.remember(cid, None)
            raise
        self._known.remember(cid, write.record)
        return made, after

    def _write_now(
        self,
        write: ConversationWrite,
        expected_revision: str | None,
        guard: WriteGuard | None,
        named: str,
        held: LineState | None = None,
    ) -> LineState | None:
        """Store ``write``; a refusal raised here, where a write whose caller left is logged.

        The line state it left when ``held`` was its line's before (``write_held``).
        """
        try:
            written, after = self.tables.write_held(write, expected_revision, guard, held)
        except ConversationConflict:
            raise
        except AccessDeniedError as exc:
            raise ConversationOwnedElsewhere(named, exc) from exc
        if not written:
            raise ConversationConflict(named)
        return after

    async def _once_per_call(
        self, entries: list[ConversationEntry], record: ConversationRecord
    ) -> tuple[list[ConversationEntry], ConversationRecord]:
        """The entries without results of calls the stored line already answered (MEM-1, ``answers``)."""
        parent = entries[0].parent_id
        history: list[ModelMessage] = []
        if parent is not None and _answers_stored(entries):
            found = await local_read(self.memory, self._entries, parent, None)
            history = [entry.message for entry in found or []]
        kept = once_per_call(history, entries)
        if len(kept) != len(entries) and record.head_id in {entry.id for entry in entries}:
            record = dataclasses.replace(record, head_id=kept[-1].id if kept else parent)
        return kept, record

    def _warn_once(self, calls: list[str]) -> None:
        if self._warned:
            return
        self._warned = True
        log.warning(
            "pydantic-ai saved tool calls together with their results (%s): the tools ran "
            "before the calls that asked for them were stored, so a crash inside a tool loses "
            "the question and the call. Run the agent with store.run(agent, prompt, "
            "conversation=..., scope=...), or pass capabilities=[store.write_ahead(conversation, "
            "scope=...)] to agent.run or agent.iter (docs/integrations.md, decision 0099); "
            "this warning is logged once per store",
            ", ".join(calls),
        )

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation's session, entries included (decision 0042: its id stays deleted)."""
        sid = self._session(conversation_id, "conversation delete")
        if isinstance(sid, Refusal):
            raise ConversationConflict(conversation_id)
        verdict = None if self.user is None else judge_session(self.memory, conversation_id, self.user, "delete_session")
        if verdict is not None and not verdict.allowed:
            if not verdict.exists:
                raise ConversationConflict(conversation_id)
            denied = AccessDeniedError(verdict.reason, rule=verdict.rule, conversation_id=conversation_id)
            raise ConversationOwnedElsewhere(conversation_id, denied)
        self._known.remember(conversation_id, None)
        what = f"pydantic-ai delete of conversation {conversation_id!r}"
        await self._queues.of(sid).write(what, self._delete_now, conversation_id, expected_revision)

    def _delete_now(self, conversation_id: str, expected_revision: str) -> None:
        """Delete the conversation; ConversationConflict when it moved on (raised here, as ``_write_now``)."""
        if not self.tables.delete(conversation_id, expected_revision):
            raise ConversationConflict(conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id; KeyError when there is none."""
        history = await self.read_history(entry_id)
        if not history or history[-1].id != entry_id:
            raise KeyError(entry_id)
        return history[-1]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id`` (the last ``limit``), read in one query."""
        if head_id is None:
            return []
        check_name(head_id, "entry_id")
        loading = LOADING.get()
        if loading is not None and loading.head == head_id and loading.limit == limit and loading.entries is not None:
            kept, loading.entries = loading.entries, None  # read with the record (``load``)
            return kept
        entries = await local_read(self.memory, self._entries, head_id, limit)
        if entries is None:
            raise KeyError(head_id)
        return entries

    def _entries(
        self,
        head_id: str,
        limit: int | None,
        read: list[tuple[str, str]] | _Unread | None = UNREAD,
        state: LineState | None = None,
    ) -> list[ConversationEntry] | None:
        """The entries up to ``head_id`` (the last ``limit``); None for an entry the store does not have.

        A user-bound store reads it only in a conversation the user may view: an entry
        of another user's conversation is unknown to it (KeyError to the caller), as
        that conversation is (decision 0109). The messages kept beside the rows are
        read when the line holds them whole, else the rows (decision 0131). ``read``:
        those messages as ``Conversations.loaded`` read them with the record (a store
        built for no user, ``limit`` not 0), else ``UNREAD``; ``state``: the line state
        ``loaded_held`` read them at, or (``read`` None) proved them by (decision 0183).
        """
        if self.user is None:
            found: str | None = None
        else:
            found = next((c for c in self.tables.holders(head_id) if self._may(c, "view")), None)
            if found is None:
                return None
        if limit == 0:
            return [] if self.tables.history(head_id, found) is not None else None
        if read is None and state is not None:  # the texts left unread: the kept history's state
            kept = self._validated.proven(state)
            if kept is not None:
                return entries_from(*kept)
            read = UNREAD  # dropped meanwhile: read them
        messages = self.tables.messages(head_id, found, limit) if isinstance(read, _Unread) else read
        if messages is not None:
            return messages_of(messages, limit, self._validated if limit is None else None, state)
        rows = self.tables.history(head_id, found)
        if rows is None:
            return None
        entries = entries_of(rows)
        return entries if limit is None else entries[len(entries) - limit :]

    # --- write-ahead (decision 0099) ----------------------------------------------------------
    def write_ahead(self, conversation: Conversation, *, scope: str | None = None) -> WriteAhead:
        """A capability for one run of ``conversation``: its messages stored before each model request and tool."""
        if not isinstance(conversation, Conversation):
            raise TypeError(
                "write_ahead needs the pydantic_ai.conversation.Conversation the run continues "
                f"(store.load(...) or Conversation(conversation_id=...)), got {type(conversation).__name__}"
            )
        scope = self._scoped(scope, "write-ahead")
        self._owner(scope)
        return WriteAhead(self, conversation, scope)

    async def run(
        self,
        agent: Agent[Any, Any],
        user_prompt: Any = None,
        *,
        conversation: Conversation,
        scope: str | None = None,
        **kwargs: Any,
    ) -> AgentRunResult[Any]:
        """``agent.run`` with write-ahead (``write_ahead``), then ``save(result, scope=scope)``; the saved result.

        The prompt and each model response are stored before the model is asked and
        before a tool runs, so a crash at any point of the turn keeps the question and
        every call; the save afterwards stores the rest, never a message twice.
        """
        given = kwargs.pop("capabilities", None) or ()
        capabilities = [*given, self.write_ahead(conversation, scope=scope)]
        result = await agent.run(user_prompt, conversation=conversation, capabilities=capabilities, **kwargs)
        await self.save(result, scope=scope)
        return result

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """pydantic-ai's ``save``; after a run's write-ahead, only what it did not store, from where it left the record."""
        held = conversation.conversation if isinstance(conversation, AgentRunResult) else conversation
        ahead = self._aheads.get(held.conversation_id)
        saving = SAVING.set(Saving(held.conversation_id, held.revision))
        try:
            if ahead is None or not ahead.continues(held):
                return await super().save(conversation, scope=scope)
            token = _CONTINUING.set(ahead)
            try:
                await super().save(conversation, scope=scope)
            finally:
                _CONTINUING.reset(token)
        finally:
            SAVING.reset(saving)
        if self._aheads.get(held.conversation_id) is ahead:
            del self._aheads[held.conversation_id]
        return list(ahead.saved)

    async def stored_prefix(self, conversation: Conversation) -> int:
        """How many of ``conversation``'s first messages are the stored history's (by ``==``)."""
        entries = await self.load_entries(conversation.conversation_id) or []
        shared = 0
        for entry, message in zip(entries, conversation.messages, strict=False):
            if entry.message != message:
                break
            shared += 1
        return shared

    async def write_ahead_messages(
        self, ahead: Ahead, messages: Sequence[ModelMessage], usage: RunUsage, scope: str | None
    ) -> None:
        """Store a run's new ``messages`` after the stored head (write-ahead); ConversationConflict when stale.

        The first write checks the revision the run's conversation was loaded at, the
        next ones the revision the previous one left: a save made since by another
        writer stops the run before its model or its tool.
        """
        cid = ahead.conversation_id
        stored = await self.read_record(cid)
        expected = ahead.base if ahead.revision is None else ahead.revision
        if (stored.revision if stored is not None else None) != expected:
            raise ConversationConflict(cid)
        if stored is not None and scope is not None and stored.scope != scope:
            raise ConversationConflict(cid)
        parent = stored.head_id if stored is not None else None
        entries: list[ConversationEntry] = []
        for message in messages:
            entries.append(ConversationEntry(parent_id=parent, message=message))
            parent = entries[-1].id
        record = ConversationRecord(
            conversation_id=cid,
            head_id=parent,
            usage=usage,
            deferred_tool_requests=stored.deferred_tool_requests if stored is not None else None,
            scope=scope if scope is not None or stored is None else stored.scope,
            forked_from=stored.forked_from if stored is not None else None,
            forked_at=stored.forked_at if stored is not None else None,
            branches=list(stored.branches) if stored is not None else [],
        )
        await self.write_record(record, new_entries=entries, expected_revision=expected)
        ahead.revision, ahead.head = record.revision, parent
        ahead.written.extend(messages)
        self._aheads[cid] = ahead

    # --- loading -------------------------------------------------------------------------------
    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        """Load a conversation; an interrupted last call comes back healed (MEM-3), unsaved.

        Implements MEM-3 for a conversation resumed with a new prompt: the calls of its
        last response that nothing answered, unless a paused run waits on them
        (``deferred_tool_requests``), get MEM-3's placeholder after the loaded messages,
        where a new user prompt can follow; the next ``save`` stores it.
        """
        token = LOADING.set(Loading(limit))
        try:
            conversation = await super().load(conversation_id, limit=limit, scope=scope)
        finally:
            LOADING.reset(token)
        if conversation is None:
            return None
        waiting = deferred_ids(conversation)
        tail = unanswered_tail(conversation.messages, waiting)
        if tail is not None:
            conversation.messages.append(placeholder_request(*tail))
        return conversation


__all__ = ["ConversationOwnedElsewhere", "FlowmemConversationStore"]
