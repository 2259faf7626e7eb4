"""The pydantic-ai package's public names (issue 36), and the extra named when pydantic-ai is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import flowmem.integrations.pydantic_ai as package
from flowmem.integrations.pydantic_ai.ahead import WriteAhead
from flowmem.integrations.pydantic_ai.store import (
    ConversationOwnedElsewhere,
    FlowmemConversationStore,
)

ROOT = Path(__file__).resolve().parents[3]


def test_the_package_exports_the_submodules_classes() -> None:
    from flowmem.integrations.pydantic_ai import FlowmemConversationStore as Store

    assert Store is FlowmemConversationStore
    assert package.WriteAhead is WriteAhead
    assert package.ConversationOwnedElsewhere is ConversationOwnedElsewhere
    assert all(getattr(package, name).__doc__ for name in package.__all__)


def test_without_pydantic_ai_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['pydantic_ai'] = None\n"
        "try:\n"
        "    import flowmem.integrations.pydantic_ai\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "'pydantic-ai' extra" in done.stdout
    assert "pip install '<checkout>[pydantic-ai]'" in done.stdout
