"""docs/api.md documents every route and every error code; the status table is total."""

from __future__ import annotations

import re
from pathlib import Path

import flowmem.errors as errors_module
from flowmem.api import create_app
from flowmem.api.errors import HTTP_CODES, status_for
from flowmem.errors import ConfigurationError, FlowmemError
from flowmem.store import MemoryStore

DOC = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")


def _error_classes() -> list[type[FlowmemError]]:
    return [
        value
        for value in vars(errors_module).values()
        if isinstance(value, type) and issubclass(value, FlowmemError) and value is not FlowmemError
    ]


def test_every_route_has_a_section() -> None:
    spec = create_app(MemoryStore()).openapi()
    headings = set(re.findall(r"^### `(\w+) (\S+)`", DOC, re.M))
    routes = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    assert routes <= headings, sorted(routes - headings)


def test_every_error_code_is_documented() -> None:
    codes = {cls.code for cls in _error_classes()} | set(HTTP_CODES)
    missing = sorted(code for code in codes if f"`{code}`" not in DOC)
    assert not missing, missing


def test_only_configuration_errors_map_to_500() -> None:
    for cls in _error_classes():
        status = status_for(cls("x") if cls.__name__ != "NodeError" else cls("n", "p", "x"))
        if issubclass(cls, ConfigurationError):
            assert status == 500
        else:
            assert 400 <= status < 500 or status in (502, 503, 507), (cls.__name__, status)
