"""The optimized ``normalize``/``repair_tool_pairing`` agree with the plain reference.

``reference_normalize`` is the first, straightforward implementation; the core was
rewritten for speed. On generated histories both must give the same rows and the
same drop count (MEM-5).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given

from flowmem.core import normalize, repair_tool_pairing
from tests.core import reference_normalize as reference
from tests.core.test_properties import HISTORY, PROPERTY_SETTINGS


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_normalize_matches_the_reference(history: list[Any]) -> None:
    fast = normalize(history)
    plain = reference.normalize(history)
    assert fast.messages == plain.messages
    assert fast.dropped == plain.dropped


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_repair_matches_the_reference(history: list[Any]) -> None:
    fast = repair_tool_pairing(history)
    plain = reference.repair_tool_pairing(history)
    assert fast.messages == plain.messages
    assert fast.dropped == plain.dropped
