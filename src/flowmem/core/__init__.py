"""The pure GR-MEM rules: no I/O, no clock, no logging (enforced by a test).

Every consumer (stores, service, nodes, API, runtime, adapters) calls these.
"""

from flowmem.core.append import (
    Answer,
    AppendOutcome,
    AppendResult,
    BufferEditor,
    Dangling,
    ListEditor,
    Oldest,
    append,
    apply_append,
    heal,
    is_empty,
    prepare,
)
from flowmem.core.messages import (
    HEALED_CONTENT,
    ROLES,
    Message,
    call_ids,
    coerce_content,
    entry_id,
    is_healed,
    result_id,
    to_flat,
    to_row,
    usable_call_id,
)
from flowmem.core.normalize import NormalizeResult, RepairResult, normalize, repair_tool_pairing
from flowmem.core.storable import check_storable, storable_text, unstorable_path
from flowmem.core.text import TextMessage, assemble, text_to_message
from flowmem.core.validate import CODES, Violation, check_sendable

__all__ = [
    "CODES",
    "HEALED_CONTENT",
    "ROLES",
    "Answer",
    "AppendOutcome",
    "AppendResult",
    "BufferEditor",
    "Dangling",
    "ListEditor",
    "Message",
    "NormalizeResult",
    "Oldest",
    "RepairResult",
    "TextMessage",
    "Violation",
    "append",
    "apply_append",
    "assemble",
    "call_ids",
    "check_sendable",
    "check_storable",
    "coerce_content",
    "entry_id",
    "heal",
    "is_empty",
    "is_healed",
    "normalize",
    "prepare",
    "repair_tool_pairing",
    "result_id",
    "storable_text",
    "text_to_message",
    "to_flat",
    "to_row",
    "unstorable_path",
    "usable_call_id",
]
