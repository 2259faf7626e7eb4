"""``FlowmemSaver``'s operations on whole threads: delete, copy, prune, delete a run's checkpoints.

Each acts as the saver's context user and judges every thread it touches before
touching any (``threads.ThreadAccess``, decisions 0107 and 0109). A mixin of
``FlowmemSaver`` (``saver.py``), over its tables, its access judge and its line heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from langchain_core.runnables import RunnableConfig

from flowmem.integrations.langgraph.lines import LineHeads
from flowmem.integrations.langgraph.threads import ThreadAccess, check_ids
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService, session_access
from flowmem.store.checkpoints import Checkpoints


class ThreadOperations:
    """The whole-thread operations of LangGraph's ``BaseCheckpointSaver``, as flowmem does them."""

    memory: MemoryService
    context: ExecutionContext | None
    tables: Checkpoints
    access: ThreadAccess
    heads: LineHeads

    if TYPE_CHECKING:

        def _writable(self, config: RunnableConfig, operation: str) -> str: ...

        def _caller(self) -> object: ...

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread: its session, and with it every checkpoint, write and line."""
        thread = self._writable({"configurable": {"thread_id": thread_id}}, "thread delete")
        if not self.access.acts(thread, "delete_session", self._caller(), "thread delete"):
            return  # no session: nothing the saver's user may touch
        self.heads.forget(thread)
        session_access.delete_session(self.memory, thread, self._caller())
        self.tables.delete_thread(thread)  # rows written before the session existed

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints, writes and lines to another thread (its session).

        The saver's user must view the source; the target is written as that user's
        (created owned by it; another owner's target raises ``AccessDeniedError``).
        """
        source = self._writable({"configurable": {"thread_id": source_thread_id}}, "thread copy")
        target = self._writable({"configurable": {"thread_id": target_thread_id}}, "thread copy")
        user = self._caller()
        if not self.access.acts(source, "view", user, "thread copy"):
            return  # no session: nothing the saver's user may read
        context = replace(self.context or ExecutionContext(), session_id=target, user_id=user)
        self.tables.copy_thread(source, target, self.memory.session_claim(target, context))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or delete all (``delete``)."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
        threads = [
            self._writable({"configurable": {"thread_id": t}}, "thread prune") for t in thread_ids
        ]
        action = "drive" if strategy == "keep_latest" else "delete_session"
        user = self._caller()
        acted = [t for t in threads if self.access.acts(t, action, user, "thread prune")]
        for thread in acted:  # every thread judged before any is touched
            self.heads.forget(thread)
        if acted:
            self.tables.prune(acted, strategy == "keep_latest")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes these runs made, on threads the saver's user may drive.

        Every thread the runs wrote is judged before any is touched (``drive``, as
        ``prune``'s ``keep_latest``: it removes history): one the saver's user may not
        drive raises ``AccessDeniedError`` and nothing is deleted; a thread with no
        session is skipped for a user (decision 0109).
        """
        runs = [str(r) for r in run_ids]
        check_ids(runs, "run_id")
        user = self._caller()
        threads = self.tables.run_threads(runs)
        acted = [t for t in threads if self.access.acts(t, "drive", user, "delete_for_runs")]
        if acted:
            self.tables.delete_for_runs(runs, acted)
        self.heads = LineHeads(self.heads.capacity)
