"""The CLI's exit codes: each storage condition an operator must fix has its own."""

from __future__ import annotations

import pytest

from flowmem.cli.errors import EXIT_FAILURE, exit_code_for
from flowmem.errors import (
    FlowmemError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (StoreFullError("x"), 7),
        (StoreReadOnlyError("x"), 8),
        (StoreCorruptError("x"), 9),
        (StoreUnavailableError("x"), EXIT_FAILURE),
        (StoreError("x"), EXIT_FAILURE),
    ],
)
def test_storage_conditions_have_their_own_exit_codes(error: FlowmemError, code: int) -> None:
    assert exit_code_for(error) == code
