"""The runtime's own durable state: a liveness lease per session and a journal per tool call.

Both are memory records in the session's own bucket (``Address("session", id, key)``)
under reserved keys starting with ``__flowmem_runtime__/``, so they live in the same
store, survive a crash, go wherever the session's data goes, and are deleted with
the session (``Store.delete_session`` deletes its whole session scope). Each write
checks, in its transaction, that the session still exists (``WriteGuard``), so none
outlives a delete that raced it: NotFoundError instead.

- The *lease* says "a process is working on this session". Every write carries a
  TTL of ``stale_after`` seconds and a running turn re-writes it (a heartbeat). A
  session whose status is ``running`` and whose lease has expired was left by a
  crashed process and may be released to ``failed``.
- A *stop request* names the turn to stop, so a turn running in another process
  (another server worker) ends between steps too.
- The *call journal* makes a tool call id execute at most once: ``started`` is
  written (and committed) before the tool runs, ``finished`` with the result text
  after. A call found ``started`` but never ``finished`` was interrupted mid-run
  by a crash and is not run again; one found ``finished`` re-delivers its result.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowmem.store.base import SESSION_SCOPE, Address, Store, WriteGuard

PREFIX = "__flowmem_runtime__/"
LEASE_KEY = PREFIX + "lease"
STOP_KEY = PREFIX + "stop"


def _call_key(call_id: str) -> str:
    digest = hashlib.sha256(call_id.encode("utf-8")).hexdigest()
    return f"{PREFIX}call/{digest}"


@dataclass(frozen=True)
class CallRecord:
    """What the journal knows of a tool call: ``started`` or ``finished`` (with its result)."""

    state: str
    name: str = ""
    content: str = ""
    error: bool = False


class RuntimeState:
    """Lease and call-journal records of sessions in one store."""

    def __init__(self, store: Store, *, stale_after: float, clock: Callable[[], float]) -> None:
        self.store = store
        self.stale_after = stale_after
        self.clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    # --- lease -----------------------------------------------------------------------
    def beat(self, session_id: str, turn_id: str, state: str = "running") -> None:
        """Write the session's lease (a heartbeat); it expires ``stale_after`` seconds from now."""
        value = {"turn_id": turn_id, "state": state, "owner": self.owner, "at": self.clock()}
        self.store.put_record(
            Address(SESSION_SCOPE, session_id, LEASE_KEY),
            value,
            self.clock() + self.stale_after,
            WriteGuard(session_id=session_id),
        )

    def lease(self, session_id: str) -> dict[str, Any] | None:
        """Return the session's live lease, or None when there is none or it has expired."""
        found, value = self.store.get_record(
            Address(SESSION_SCOPE, session_id, LEASE_KEY), self.clock()
        )
        return value if found and isinstance(value, dict) else None

    # --- stop requests (from any process) ---------------------------------------------
    def request_stop(self, session_id: str, turn_id: str) -> None:
        """Ask turn ``turn_id`` of the session to stop, wherever it runs."""
        self.store.put_record(
            Address(SESSION_SCOPE, session_id, STOP_KEY),
            {"turn_id": turn_id, "at": self.clock()},
            self.clock() + self.stale_after,
            WriteGuard(session_id=session_id),
        )

    def stop_requested(self, session_id: str, turn_id: str) -> bool:
        """True when a stop was requested for turn ``turn_id`` of the session."""
        found, value = self.store.get_record(
            Address(SESSION_SCOPE, session_id, STOP_KEY), self.clock()
        )
        return found and isinstance(value, dict) and value.get("turn_id") == turn_id

    # --- call journal ------------------------------------------------------------------
    def call(self, session_id: str, call_id: str) -> CallRecord | None:
        """Return what the journal knows of ``call_id`` in this session."""
        found, value = self.store.get_record(
            Address(SESSION_SCOPE, session_id, _call_key(call_id)), self.clock()
        )
        if not found or not isinstance(value, dict) or value.get("id") != call_id:
            return None
        return CallRecord(
            str(value.get("state")),
            str(value.get("name", "")),
            str(value.get("content", "")),
            bool(value.get("error")),
        )

    def call_started(self, session_id: str, call_id: str, name: str) -> None:
        """Record (durably, before the tool runs) that ``call_id`` is starting."""
        self._put_call(session_id, call_id, {"state": "started", "name": name})

    def call_finished(
        self, session_id: str, call_id: str, name: str, content: str, error: bool
    ) -> None:
        """Record that ``call_id`` returned, with the result text it answered with."""
        self._put_call(
            session_id,
            call_id,
            {"state": "finished", "name": name, "content": content, "error": error},
        )

    def _put_call(self, session_id: str, call_id: str, value: dict[str, Any]) -> None:
        value = {"id": call_id, "at": self.clock(), **value}
        self.store.put_record(
            Address(SESSION_SCOPE, session_id, _call_key(call_id)),
            value,
            None,
            WriteGuard(session_id=session_id),
        )
