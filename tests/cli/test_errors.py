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


def test_a_busy_port_has_its_own_exit_code_documented_in_the_guide() -> None:
    from pathlib import Path

    from flowmem.cli.errors import EXIT_CANNOT_LISTEN, EXIT_CODES, EXIT_FAILURE, EXIT_INPUT

    taken = {code for _, code in EXIT_CODES} | {0, 1, EXIT_INPUT, EXIT_FAILURE, 130}
    assert EXIT_CANNOT_LISTEN not in taken
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text(encoding="utf-8")
    assert f"{EXIT_CANNOT_LISTEN} the server cannot listen" in guide
