"""The LangGraph package's public names, as LangGraph's own packages export theirs (issue 36)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import flowmem.integrations.langgraph as package
from flowmem.integrations.langgraph.healing import FlowmemHealing, heal_hook, heal_messages
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.integrations.langgraph.store import FlowmemStore
from flowmem.integrations.langgraph.window import FlowmemWindow
from flowmem.integrations.langgraph.writeahead import write_ahead_tool

ROOT = Path(__file__).resolve().parents[3]


def test_the_package_exports_the_submodules_classes() -> None:
    from flowmem.integrations.langgraph import FlowmemSaver as Saver
    from flowmem.integrations.langgraph import FlowmemStore as Store

    assert Saver is FlowmemSaver and Store is FlowmemStore
    assert package.FlowmemHealing is FlowmemHealing
    assert package.FlowmemWindow is FlowmemWindow
    assert package.heal_hook is heal_hook and package.heal_messages is heal_messages
    assert package.write_ahead_tool is write_ahead_tool
    assert all(hasattr(package, name) for name in package.__all__)
    assert all(getattr(package, name).__doc__ for name in package.__all__)


def test_without_langgraph_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['langgraph'] = None\n"
        "try:\n"
        "    import flowmem.integrations.langgraph\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "'langgraph' extra" in done.stdout
    assert "pip install '<checkout>[langgraph]'" in done.stdout
