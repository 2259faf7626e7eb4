"""``FlowmemSaver``: a LangGraph ``BaseCheckpointSaver`` whose threads are flowmem sessions.

- **A thread is a session** (decision 0032, 0040). Its first write creates the session,
  owned by ``config["configurable"]["user_id"]`` (LangGraph's convention), else the
  user of the ``ExecutionContext`` the saver was built with, else nobody (MEM-9). A
  well-formed thread id that is not a usable session id (``"None"``, ``" "``) refuses as MEM-13 says: a read finds
  nothing, a write raises ``ScopeRefusedError``; storage is not touched and one
  WARNING is logged. Session delete and ``flowmem user erase`` remove the thread.
- **Messages are stored once.** A channel holding a list of LangChain messages is
  kept as rows of the session's buffers (``lines``): a step that adds one message
  writes one row; the checkpoint records ``(buffer key, row count)``. Every other
  channel is stored like LangGraph's own savers store it, once per version.
- **One thread, one line of history.** A run that started from the thread's latest
  checkpoint may only add checkpoints on top of it: when another writer got there
  first, its next ``put`` raises ``ThreadForkedError`` and stores nothing. A run
  started from an older checkpoint (time travel, a fork) branches as LangGraph means.
- **Write-ahead** (decision 0097). ``write_ahead(config)`` blocks a task until the
  checkpoint it started from is stored, so with LangGraph's default ``"async"``
  durability a model is never asked, nor a tool started, before the question and the
  call are in the database (``writeahead`` holds the wrappers that call it). A run
  whose tools answered calls of a checkpoint nobody waited for is told once, with
  the fix (a WARNING on the ``flowmem`` logger and a ``RuntimeWarning``).
- **Acting on a thread needs the right to, as over HTTP** (``threads``; decisions 0107,
  0109), judged by ``flowmem.access.decide`` for the caller a write is claimed for.
  A thread the caller may not view is not found on read (``get_tuple`` None, ``list``
  skips it); ``delete_thread``, ``copy_thread`` and ``prune`` (the saver's context
  user) raise ``AccessDeniedError`` for another user's thread and change nothing. A
  caller without a user reads and acts on the unowned threads only.
- **Ids are checked as the API checks them** (``threads``): NUL, a lone surrogate or over
  255 code points is a typed error on every backend before anything is stored or read.
- **The caller's owner travels with the configs it reads.** ``get_tuple`` and
  ``list`` return configs carrying the ``user_id`` of the config they were given, so
  LangGraph's replay (``invoke(None, snapshot.config)``) and fork
  (``update_state(snapshot.config, …)``) write as the same user.

The async methods run the same work in worker threads (``threaded.ThreadedSaver``), so
the event loop never waits on the database, one thread's calls at a time in the order
made: a run cancelled while its checkpoint was stored is read by the next (decision 0156).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from flowmem.errors import LineMovedError, ThreadForkedError
from flowmem.integrations.langgraph.durable import (
    HEALED_ID_PREFIX,
    DurableCheckpoints,
    Key,
    open_after,
    parent_checkpoint,
)
from flowmem.integrations.langgraph.forks import RefusedCheckpoints
from flowmem.integrations.langgraph.lines import (
    LineHead,
    LineHeads,
    addresses,
    base_key,
    branch_key,
    dereference,
    from_rows,
    is_message_list,
    message_channels,
    open_calls_of,
    reference,
    to_rows,
)
from flowmem.integrations.langgraph.thread_ops import ThreadOperations
from flowmem.integrations.langgraph.threaded import ThreadedSaver
from flowmem.integrations.langgraph.threads import (
    ResolvedThreads,
    ThreadAccess,
    check_config,
    check_config_ids,
    check_ids,
    owned_configurable,
)
from flowmem.integrations.refusals import usable_session
from flowmem.scope import ExecutionContext, Refusal
from flowmem.service import MemoryService, kinds
from flowmem.service.checks import check_context_ids
from flowmem.store import open_store
from flowmem.store.checkpoints import (
    LINE_PREFIX,
    ROWS_TYPE,
    CheckpointFilter,
    CheckpointPut,
    Head,
    LineAppend,
    PendingWrites,
    StoredBlob,
    StoredCheckpoint,
    StoredWrite,
)

log = logging.getLogger("flowmem")

HEAD_MARK = "__flowmem_head"
"""Set in the config a read returns when its checkpoint was the thread's latest.

Its value is a token new at every such read. LangGraph carries it into every ``put``
and ``put_writes`` of the run that read it; such a ``put`` must find its parent still
the latest, and once one is refused every later write of that run is refused too
(``__``: LangGraph copies no such key into metadata).
"""
_EMPTY = ("empty", b"")
DURABILITY = "__pregel_durability"
"""LangGraph's config key of a run's durability (``langgraph._internal._constants``);
absent: ``"async"``, LangGraph's default."""
UNGUARDED = (
    "FlowmemSaver: thread {thread!r} ran tools without waiting for the checkpoint holding "
    'their calls to be stored (LangGraph\'s default durability "async" saves it while the '
    "tools run; no write-ahead): a crash there loses the call and maybe the question. Add FlowmemHealing() to create_agent's "
    "middleware, ToolNode(tools, wrap_tool_call=write_ahead_tool, "
    "awrap_tool_call=awrite_ahead_tool) to a graph of your own or the prebuilt ReAct agent, "
    "write_ahead(config) to a node of your own that runs tools, or run with "
    'durability="sync" (docs/integrations.md, LangGraph durability)'
)
"""The once-per-saver warning of a run whose tools did not wait for their call."""


def _configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    return (config or {}).get("configurable") or {}


class FlowmemSaver(ThreadOperations, ThreadedSaver):
    """LangGraph checkpoints in flowmem: threads are sessions, messages are buffer rows."""

    keep_threads = True
    """Decision 0212: a write's thread and context resolved once per thread and user id
    (``ResolvedThreads``), not at every ``put`` and ``put_writes``; False: resolved at each
    (the plain path). tests/integrations/langgraph/test_threads.py holds both to
    the same threads, contexts and errors."""

    def __init__(
        self,
        memory: MemoryService,
        *,
        context: ExecutionContext | None = None,
        serde: Any = None,
        cache_threads: int = 256,
        write_ahead_timeout: float = 30.0,
    ) -> None:
        if not isinstance(memory, MemoryService):
            raise TypeError(
                f"FlowmemSaver needs a flowmem.service.MemoryService, got {type(memory).__name__}"
                " (a checkpointer stores LangGraph's own state: it runs beside the database)"
            )
        if context is not None and not isinstance(context, ExecutionContext):
            raise TypeError(f"context must be a flowmem ExecutionContext, got {context!r}")
        check_context_ids(context)  # ids the API would refuse (issue 38 §4)
        if not isinstance(write_ahead_timeout, (int, float)) or write_ahead_timeout <= 0:
            raise ValueError(
                f"write_ahead_timeout must be a number of seconds above 0, got {write_ahead_timeout!r}"
            )
        super().__init__(serde=serde)
        self.memory = memory
        self.context = context
        self.tables = kinds.checkpoints(memory)
        self.access = ThreadAccess(memory)
        self.heads = LineHeads(cache_threads)
        self.resolved = ResolvedThreads(cache_threads)
        self.refused = RefusedCheckpoints()
        self.durable = DurableCheckpoints()
        self.write_ahead_timeout = float(write_ahead_timeout)
        self._warned = False

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str, **options: Any) -> Iterator[FlowmemSaver]:
        """A saver on the flowmem database at ``url`` (``sqlite:///app.db``, ``postgresql://…``)."""
        if "://" not in url:
            url = f"sqlite:///{url}"  # a bare path, as SqliteSaver.from_conn_string takes
        store = open_store(url)
        try:
            yield cls(MemoryService(store), **options)
        finally:
            store.close()

    # --- threads and owners ------------------------------------------------------------
    def _context(self, conf: Mapping[str, Any]) -> ExecutionContext:
        base = self.context or ExecutionContext()
        user = conf.get("user_id", base.user_id)
        return replace(base, session_id=conf.get("thread_id"), user_id=user)

    def _thread(self, config: RunnableConfig | None, operation: str) -> str | Refusal:
        conf = _configurable(config)
        check_config(conf, None if self.context is None else self.context.user_id)
        return self.memory.resolve(operation, "session", LINE_PREFIX, self._context(conf))

    def _viewable(self, thread: str, conf: Mapping[str, Any]) -> bool:
        """True when the caller of ``conf`` (``_context``) may read ``thread`` (decision 0107)."""
        return self.access.viewable(thread, self._context(conf).user_id)

    def _caller(self) -> object:
        """The user of a thread operation that takes no config: the saver's context user."""
        return None if self.context is None else self.context.user_id

    def _readable(self, config: RunnableConfig | None, operation: str) -> str | None:
        """The thread a read names when its caller may view it, else None (not found)."""
        thread = self._thread(config, operation)
        if isinstance(thread, Refusal) or not self._viewable(thread, _configurable(config)):
            return None
        return thread

    def _writable(self, config: RunnableConfig, operation: str) -> str:
        thread = self._thread(config, operation)
        return usable_session(
            thread,
            f"LangGraph {operation}",
            "thread",
            "thread_id",
            "config['configurable']['thread_id']",
        )

    def _write_thread(self, config: RunnableConfig, operation: str) -> tuple[str, ExecutionContext]:
        """``_writable``'s thread and the caller's context (``_context``), kept per thread and user (decision 0212).

        A config whose two ids were resolved before from the same saver context gets
        what they resolved to, its namespace and checkpoint id checked as ``check_config``
        checks them; any other is resolved as ``_writable`` does, and kept if it is a
        thread (a refusal raises, logged each time).
        """
        conf = _configurable(config)
        key = ResolvedThreads.key(conf) if self.keep_threads else None
        base = self.context
        if key is not None:
            found = self.resolved.get(key, base)
            if found is not None:
                check_config_ids(conf)
                return found
        thread = self._writable(config, operation)
        context = self._context(conf)
        if key is not None:
            self.resolved.keep(key, base, thread, context)
        return thread, context

    # --- put -----------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; message lists as line rows, other channels as blobs.

        A write-ahead waiter (``write_ahead``) learns that it is stored, or that it
        never will be (the error is raised to the waiter too).
        """
        thread, context = self._write_thread(config, "checkpoint write")
        conf = _configurable(config)
        ns = str(conf.get("checkpoint_ns", ""))
        key: Key = (thread, ns, checkpoint["id"])
        try:
            stored, lines = self._put(thread, context, config, checkpoint, metadata, new_versions)
        except BaseException as exc:
            self.durable.failed(key, exc)
            raise
        found = message_channels(
            checkpoint["channel_values"], lines, lambda channel: self.heads.get(thread, ns, channel)
        )
        lists = [messages for messages, _ in found]
        # a list's open calls from its head: only the messages past it read (decision 0177)
        self.durable.stored(key, frozenset().union(*(open_calls_of(m, h) for m, h in found)))
        parent = conf.get("checkpoint_id")
        if (
            parent
            and not self._warned
            and metadata.get("source") == "loop"  # a run's step, not update_state
            and conf.get(DURABILITY, "async") == "async"
            and self.durable.unguarded((thread, ns, str(parent)), lists, HEALED_ID_PREFIX)
        ):
            self._warned = True
            message = UNGUARDED.format(thread=thread)
            log.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return stored

    def _put(
        self,
        thread: str,
        context: ExecutionContext,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, Mapping[str, LineHead]]:
        """Write the checkpoint; with the channels it stored as lines (message lists) and their new heads."""
        conf = _configurable(config)
        ns = str(conf.get("checkpoint_ns", ""))
        parent = conf.get("checkpoint_id")
        values = checkpoint["channel_values"]
        full = get_checkpoint_metadata(config, metadata)
        check_ids([checkpoint["id"]], "checkpoint_id")
        check_ids(new_versions, "channel", longest=None)
        check_ids([str(v) for v in new_versions.values()], "channel_version")
        if full.get("run_id") is not None:
            check_ids([str(full["run_id"])], "run_id")
        # the versions go in their own column (what pruning reads), not twice
        stored_cp = {
            k: v for k, v in checkpoint.items() if k not in ("channel_values", "channel_versions")
        }
        protect = bool(conf.get(HEAD_MARK)) or (
            parent is None and full.get("source") == "input" and full.get("step") == -1
        )
        stored = StoredCheckpoint(
            thread_id=thread,
            ns=ns,
            checkpoint_id=checkpoint["id"],
            parent_id=parent,
            checkpoint=self.serde.dumps_typed(stored_cp),
            metadata=self.serde.dumps_typed(full),
            run_id=None if full.get("run_id") is None else str(full.get("run_id")),
            versions=dict(checkpoint["channel_versions"]),
        )
        guard = self.memory.session_claim(thread, context)
        head = Head(parent) if protect else None
        run = conf.get(HEAD_MARK)
        with self.refused.writing(thread):
            self.refused.check(thread, ns, checkpoint["id"], run)
        for fresh in (False, True):
            blobs, lines, heads = self._plan(
                thread, ns, checkpoint["id"], values, new_versions, fresh
            )
            try:
                self.tables.put_checkpoint(CheckpointPut(stored, blobs, lines, guard, head))
            except ThreadForkedError:
                with self.refused.refusing(thread):  # no write of this run's lands after it
                    self.refused.add(thread, ns, checkpoint["id"], run)
                    self.tables.delete_writes(thread, ns, checkpoint["id"])
                raise
            except LineMovedError:
                self.heads.forget(thread)
                if fresh:
                    raise
                continue
            for channel, line_head in heads.items():
                self.heads.remember(thread, ns, channel, line_head)
            break
        return {"configurable": owned_configurable(conf, thread, ns, checkpoint["id"])}, heads

    def _plan(
        self,
        thread: str,
        ns: str,
        checkpoint_id: str,
        values: Mapping[str, Any],
        new_versions: ChannelVersions,
        fresh: bool,
    ) -> tuple[list[StoredBlob], list[LineAppend], dict[str, LineHead]]:
        """The blobs, line rows and new line heads of one checkpoint's new channel versions.

        ``fresh``: start every message line anew (a retry after another writer moved one).
        """
        blobs: list[StoredBlob] = []
        lines: list[LineAppend] = []
        heads: dict[str, LineHead] = {}
        now = int(time.time())
        for channel, version in new_versions.items():
            if channel not in values:
                blobs.append(StoredBlob(channel, str(version), _EMPTY))
                continue
            value = values[channel]
            if not isinstance(value, list):  # not a message list: a blob
                blobs.append(StoredBlob(channel, str(version), self.serde.dumps_typed(value)))
                continue
            known = None if fresh else self.heads.get(thread, ns, channel)
            # the list as it is now, kept as the next head; its addresses read once (decision 0177)
            objects = tuple(value)
            read = addresses(objects)
            if known is not None and known.extended_by(objects, read):
                # the stored prefix is the very objects written before: check only the rest
                new: Sequence[Any] = list(objects[known.count :])
                if not is_message_list(new) and new:
                    blobs.append(StoredBlob(channel, str(version), self.serde.dumps_typed(value)))
                    continue
                key, expect = known.key, known.count
                # its open calls from the stored ones: only the new messages read (decision 0177)
                opened: frozenset[str] | None = open_after(known.open_calls(), new)
            elif not is_message_list(value):
                blobs.append(StoredBlob(channel, str(version), self.serde.dumps_typed(value)))
                continue
            else:
                base = base_key(ns, channel)
                key = base
                if fresh or self.tables.line_count(thread, base):
                    key = branch_key(base, checkpoint_id)
                expect, new, opened = 0, objects, None
            if new:
                lines.append(LineAppend(key, expect, to_rows(new, self.serde, now)))
            blobs.append(StoredBlob(channel, str(version), reference(key, len(objects))))
            heads[channel] = LineHead(key, len(objects), objects, read, open=opened)
        return blobs, lines, heads

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (special channels replace, others keep the first)."""
        thread, context = self._write_thread(config, "checkpoint write")
        conf = _configurable(config)
        check_ids([task_id], "task_id")
        check_ids([task_path, *(channel for channel, _ in writes)], "channel", longest=None)
        stored = [
            StoredWrite(
                task_id,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                self.serde.dumps_typed(value),
                task_path,
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        guard = self.memory.session_claim(thread, context)
        ns, checkpoint_id = str(conf.get("checkpoint_ns", "")), conf["checkpoint_id"]
        with self.refused.writing(thread):  # beside the checkpoint's check; a refusal waits
            self.refused.check(thread, ns, checkpoint_id, conf.get(HEAD_MARK))
            self.tables.put_writes(PendingWrites(thread, ns, checkpoint_id, stored, guard))

    # --- reads ----------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names, or the thread's latest; None when there is none."""
        thread = self._readable(config, "checkpoint read")
        if thread is None:
            return None
        conf = _configurable(config)
        ns = str(conf.get("checkpoint_ns", ""))
        wanted = get_checkpoint_id(config)
        stored = self.tables.get_checkpoint(thread, ns, wanted)
        if stored is None:
            return None
        latest = stored if wanted is None else self.tables.get_checkpoint(thread, ns, None)
        is_head = latest is not None and latest.checkpoint_id == stored.checkpoint_id
        return self._tuple(stored, None, is_head, conf)

    def _tuple(
        self, stored: StoredCheckpoint, metadata: Any, is_head: bool, asked: Mapping[str, Any]
    ) -> CheckpointTuple:
        thread, ns = stored.thread_id, stored.ns
        checkpoint = self.serde.loads_typed(stored.checkpoint)
        checkpoint.setdefault("channel_versions", dict(stored.versions))
        versions = {ch: str(v) for ch, v in checkpoint["channel_versions"].items()}
        values: dict[str, Any] = {}
        for blob in self.tables.get_blobs(thread, ns, versions):
            if blob.value[0] == _EMPTY[0]:
                continue
            if blob.value[0] == ROWS_TYPE:
                values[blob.channel] = self._line(thread, ns, blob.channel, blob.value[1])
            else:
                values[blob.channel] = self.serde.loads_typed(blob.value)
        writes = sorted(
            self.tables.get_writes(thread, ns, stored.checkpoint_id),
            key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx),
        )
        self.durable.read((thread, ns, stored.checkpoint_id))
        configurable = owned_configurable(asked, thread, ns, stored.checkpoint_id)
        if is_head:
            configurable[HEAD_MARK] = uuid.uuid4().hex
        parent = None
        if stored.parent_id:
            parent = {"configurable": owned_configurable(asked, thread, ns, stored.parent_id)}
        return CheckpointTuple(
            config={"configurable": configurable},
            checkpoint={**checkpoint, "channel_values": values},  # type: ignore[typeddict-item]
            metadata=self.serde.loads_typed(stored.metadata) if metadata is None else metadata,
            parent_config=parent,  # type: ignore[arg-type]
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed(w.value)) for w in writes
            ],
        )

    def _line(self, thread: str, ns: str, channel: str, blob: bytes) -> list[Any]:
        """The messages a line reference names; remembered as the channel's head."""
        key, count = dereference(blob)
        known = self.heads.get(thread, ns, channel)
        if known is not None and known.key == key and known.count == count:
            return list(known.messages)  # lines only grow: the same rows, already read
        messages = from_rows(self.tables.line_rows(thread, key, count), self.serde)
        head = LineHead(key, count, tuple(messages), all_messages=is_message_list(messages))
        self.heads.remember(thread, ns, channel, head)
        return messages

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, filtered by metadata equality, before a checkpoint, limited."""
        thread: str | None = None
        ns: str | None = None
        wanted = None
        asked = _configurable(config)
        if config is not None:
            resolved = self._readable(config, "checkpoint list")
            if resolved is None:
                return
            thread = resolved
            conf = _configurable(config)
            ns = None if conf.get("checkpoint_ns") is None else str(conf["checkpoint_ns"])
            wanted = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        if before_id is not None:
            check_ids([before_id], "checkpoint_id")
        if limit is not None and limit <= 0:
            return
        found = 0
        viewable: dict[str, bool] = {} if thread is None else {thread: True}
        for stored in self.tables.list_checkpoints(CheckpointFilter(thread, ns, wanted, before_id)):
            if stored.thread_id not in viewable:  # list(None): every thread, each judged once
                viewable[stored.thread_id] = self._viewable(stored.thread_id, asked)
            if not viewable[stored.thread_id]:
                continue
            metadata = self.serde.loads_typed(stored.metadata)
            if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                continue
            yield self._tuple(stored, metadata, False, asked)
            found += 1
            if limit is not None and found >= limit:
                return

    # --- write-ahead ------------------------------------------------------------------------
    def write_ahead(self, config: RunnableConfig) -> bool:
        """Block until the checkpoint a task's ``config`` started from is stored (write-ahead).

        The task's config names it: its thread, its namespace's entry of LangGraph's
        checkpoint map. True when it is stored (at once with ``durability="sync"``),
        False when there is nothing to wait for (no thread, ``durability="exit"``,
        which stores nothing before the run ends) or after ``write_ahead_timeout``
        seconds (logged). Raises the error its ``put`` raised (``ThreadForkedError``:
        the run lost the thread, its tool must not run).
        """
        conf = _configurable(config)
        if conf.get(DURABILITY, "async") == "exit":
            return False
        parent = parent_checkpoint(conf)
        if parent is None:
            return False
        thread = self._thread(config, "checkpoint read")
        if isinstance(thread, Refusal):
            return False
        ns, checkpoint_id = parent
        check_ids([ns], "checkpoint_ns")
        check_ids([checkpoint_id], "checkpoint_id")
        key: Key = (thread, ns, checkpoint_id)
        if self.durable.wait(
            key,
            self.write_ahead_timeout,
            lambda: self.tables.get_checkpoint(thread, ns, checkpoint_id) is not None,
        ):
            return True
        log.warning(
            "FlowmemSaver: checkpoint %s of thread %r was not stored within %.1f s; the task "
            "runs without its write-ahead (a crash now may lose its call)",
            checkpoint_id,
            thread,
            self.write_ahead_timeout,
        )
        return False

    async def awrite_ahead(self, config: RunnableConfig) -> bool:
        """``write_ahead`` for async runs: the event loop keeps running while it waits."""
        conf = _configurable(config)
        parent = parent_checkpoint(conf)
        thread = conf.get("thread_id")
        if (
            parent is not None
            and thread is not None
            and self.durable.is_stored((str(thread), *parent))
        ):
            return True  # stored already: no worker thread needed
        return await asyncio.to_thread(self.write_ahead, config)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A version above ``current``, unique across branches: ``0000000007.9f3a61c2``.

        Fixed-width digits so that versions compare as strings; a random suffix so that
        two branches of one thread never make the same version of a channel (the blobs
        are keyed by version). 19 characters, where LangGraph's own savers use 49.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:010}.{random.getrandbits(32):08x}"


__all__ = ["HEAD_MARK", "FlowmemSaver", "parent_checkpoint"]
