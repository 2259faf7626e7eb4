"""Adapters that put flowmem under other frameworks' memory interfaces.

Each adapter lives in its own module and needs its extra:
``flowmem.integrations.langchain`` (``pip install 'flowmem[langchain]'``) and
``flowmem.integrations.openai_agents`` (``pip install 'flowmem[openai-agents]'``).
This package imports neither, so importing it never needs an extra.
"""

from __future__ import annotations

import importlib


def require(module: str, extra: str) -> None:
    """Import ``module`` or raise an ``ImportError`` that names the extra to install."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this flowmem adapter needs {module!r}: pip install 'flowmem[{extra}]'"
        ) from exc
