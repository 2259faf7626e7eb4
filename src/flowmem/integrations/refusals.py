"""An adapter's write through a session id the session scope refuses (MEM-13): one refusal, one wording.

A framework's thread or conversation id is the session id of what it stores; when
the session scope refuses it (no usable session id), a read finds nothing and a write
raises ``ScopeRefusedError`` before storage is touched, saying what to give.
"""

from __future__ import annotations

from flowmem.errors import ScopeRefusedError
from flowmem.scope import Refusal


def usable_session(found: str | Refusal, call: str, holder: str, argument: str, where: str | None = None) -> str:
    """``found``, the resolved session id of a write ``call`` (``"LangGraph put"``), or its ScopeRefusedError.

    ``holder`` is what carries the id (``thread``), ``argument`` its name and ``where``
    where the caller sets it (default ``argument``).
    """
    if not isinstance(found, Refusal):
        return found
    raise ScopeRefusedError(
        f"{call} refused: {found.sentence} Give the {holder} a usable session id "
        f"({where or argument}); nothing was stored",
        rule="MEM-13",
        argument=argument,
    )
