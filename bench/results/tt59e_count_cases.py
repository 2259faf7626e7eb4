"""A pytest plugin counting every case schemathesis's ``call_and_validate`` sends (decision 0209).

``COUNT_CASES=PREFIX pytest -p tt59e_count_cases ...`` (this directory on ``PYTHONPATH``)
writes ``PREFIX.<worker>.json``: per case its operation, phase, generation mode, status,
and for a coverage case its parameters, headers (no ``Idempotency-Key``) and body.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from schemathesis.generation.case import Case

_rows: list[list[Any]] = []
_plain = Case.call_and_validate


def _described(case: Case) -> str:
    """A coverage case's parameters, headers and body, as JSON."""
    headers = {k: v for k, v in (case.headers or {}).items() if k != "Idempotency-Key"}
    body = None if type(case.body).__name__ == "NotSet" else case.body
    return json.dumps(
        [case.path_parameters, case.query, headers, body], default=str, sort_keys=True
    )


def _counted(self: Case, *args: Any, **kwargs: Any) -> Any:
    """``Case.call_and_validate``, noting the case and its answer's status."""
    response = None
    try:
        response = _plain(self, *args, **kwargs)
        return response
    finally:
        phase = str(getattr(getattr(self.meta, "phase", None), "name", None))
        mode = str(getattr(getattr(self.meta, "generation", None), "mode", None))
        described = _described(self) if phase == "coverage" else None
        status = getattr(response, "status_code", None)
        _rows.append([f"{self.method.upper()} {self.path}", phase, mode, status, described])


Case.call_and_validate = _counted  # type: ignore[method-assign]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the cases noted to ``$COUNT_CASES.<worker>.json``."""
    prefix = os.environ.get("COUNT_CASES")
    if prefix:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{prefix}.{worker}.json", "w", encoding="utf-8") as out:
            json.dump(_rows, out)
