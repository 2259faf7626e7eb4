"""The optimized ``check_sendable`` reports exactly what the plain reference reports."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from flowmem.core import check_sendable, normalize
from tests.core import reference_validate as reference
from tests.core.test_properties import HISTORY, PROPERTY_SETTINGS


@PROPERTY_SETTINGS
@given(HISTORY)
def test_check_sendable_matches_the_reference(history: list[Any]) -> None:
    assert check_sendable(history) == reference.check_sendable(history)
    normalized = normalize(history).messages
    assert check_sendable(normalized) == reference.check_sendable(normalized) == []
