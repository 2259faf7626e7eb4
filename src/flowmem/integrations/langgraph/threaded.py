"""``ThreadedSaver``: a LangGraph checkpointer whose async methods run its sync ones in worker threads, in order.

``FlowmemSaver`` does its database work synchronously; these twins run that same work
in worker threads, so the event loop never waits on the database, and ``alist`` reads
each page in one. A worker thread cannot be stopped: a run cancelled while its
checkpoint is being stored leaves the write going, and the next run of the thread,
reading it in a thread of its own, would find the checkpoint before it as the latest
(and the late write would then refuse the next run, or be refused itself: decision
0156). So a thread's calls run one at a time in the order made (one ``InOrder`` per
thread id): a read sees every write made before it, even one whose caller left; a
call whose caller left before it started is never made; a write that fails after its
caller left is logged at ERROR (``InOrder.write``). Different threads stay concurrent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from flowmem.integrations.in_order import InOrder, Queues


def thread_of(config: RunnableConfig | None) -> Hashable:
    """The thread id a config names (its queue's key), None when it names none."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


class ThreadedSaver(BaseCheckpointSaver[str]):
    """The async methods of a checkpointer as its sync ones in worker threads, one thread's at a time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._threads = Queues()  # per thread id: its calls, one at a time in the order made

    def _turn(self, thread: Hashable) -> InOrder:
        """The queue of a thread's calls; a fresh one (no order) for a call that names no thread."""
        return InOrder() if thread is None else self._threads.of(thread)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` in a worker thread, after the thread's calls made before it."""
        found: CheckpointTuple | None = await self._turn(thread_of(config)).run(self.get_tuple, config)
        return found

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` with each page read in a worker thread, in its thread's turn (no thread: any order)."""
        found = self.list(config, filter=filter, before=before, limit=limit)
        turn = self._turn(thread_of(config))
        done = object()
        while (item := await turn.run(next, found, done)) is not done:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` in a worker thread, in its thread's turn; its failure logged if its caller left."""
        thread = thread_of(config)
        what = f"LangGraph checkpoint {checkpoint.get('id')!r} of thread {thread!r}"
        result: RunnableConfig = await self._turn(thread).write(
            what, self.put, config, checkpoint, metadata, new_versions
        )
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` in a worker thread, in its thread's turn; its failure logged if its caller left."""
        thread = thread_of(config)
        checkpoint = ((config or {}).get("configurable") or {}).get("checkpoint_id")
        what = (
            f"LangGraph pending writes ({len(writes)}: {', '.join(sorted({c for c, _ in writes}))}) "
            f"of task {task_id!r} on checkpoint {checkpoint!r} of thread {thread!r}"
        )
        await self._turn(thread).write(what, self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` in a worker thread, in the thread's turn."""
        await self._turn(str(thread_id)).write(
            f"LangGraph delete of thread {thread_id!r}", self.delete_thread, thread_id
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` once the source's calls made before it ended, in the target's turn."""
        await self._threads.after([str(source_thread_id)])
        await self._turn(str(target_thread_id)).write(
            f"LangGraph copy of thread {source_thread_id!r} to {target_thread_id!r}",
            self.copy_thread,
            source_thread_id,
            target_thread_id,
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` in a worker thread once the calls made before it on these threads ended."""
        await self._threads.after([str(t) for t in thread_ids])
        await InOrder().write(
            f"LangGraph prune ({strategy}) of threads {list(thread_ids)!r}",
            self.prune,
            thread_ids,
            strategy=strategy,
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` once every call of the saver's threads made before it ended.

        A run cancelled while its checkpoint was being stored (LangGraph's rollback of a
        run) has that checkpoint deleted too, not left to land after the delete, on
        whichever thread it is.
        """
        await self._threads.after()
        await InOrder().write(f"LangGraph delete of runs {list(run_ids)!r}", self.delete_for_runs, run_ids)


__all__ = ["ThreadedSaver", "thread_of"]
