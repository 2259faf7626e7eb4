"""What the bench smoke tests share: running a bench in its quick mode, its JSON's common part.

A bench is a script (bench/ is no package), so it runs in a process of its own, as a
user runs it: forked from the test process's bench fork server, which imported the
frameworks the bench names in ``PRELOAD`` once (tests/bench/forked.py, decision 0203);
its shared modules (bench/lib) load by path for the in-process tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench import forked

BENCH = Path(__file__).resolve().parents[2] / "bench"

PRELOAD: dict[str, tuple[str, ...]] = {
    "adk_sessions": (
        "google.adk.events",
        "google.adk.sessions.database_session_service",
        "flowmem.integrations.adk",
    ),
    "core": ("deepagents.middleware.patch_tool_calls",),
    "formats": (
        "langchain_core.messages",
        "langchain_anthropic.chat_models",
        "langchain_openai.chat_models.base",
        "langchain_google_genai.chat_models",
    ),
    "http": ("flowmem.service", "httpx"),
    "in_order": (
        "google.adk.events",
        "langchain_core.messages",
        "langgraph.graph",
        "pydantic_ai.conversation",
        "flowmem.integrations.adk",
        "flowmem.integrations.langgraph.saver",
    ),
    "langgraph": (
        "langchain_core.messages",
        "langgraph.graph",
        "flowmem.integrations.langgraph.saver",
        "flowmem.integrations.langgraph.lines",
        "flowmem.store.postgres",
    ),
    "mcp_clients": ("anyio", "mcp.client.session", "mcp.client.stdio"),
    "memory_engine": ("langgraph.checkpoint.base", "flowmem.integrations.langgraph.saver"),
    "pa_conversations": ("pydantic_ai.conversation", "flowmem.integrations.pydantic_ai"),
    "peers_postgres": ("flowmem.service", "flowmem.store.postgres", "langchain_postgres"),
    "read_memory": ("flowmem.service", "httpx"),
    "store": (
        "flowmem.service",
        "flowmem.store.postgres",
        "deepagents.middleware.patch_tool_calls",
        "agents",
        "sqlalchemy",
        "langchain_community.chat_message_histories.sql",
    ),
    "vectors": (
        "numpy",
        "langchain_core.embeddings",
        "flowmem.integrations.langgraph",
        "flowmem.store.postgres",
    ),
    "wal_pages": ("flowmem.service", "agents"),
    "wal_postgres": ("flowmem.service", "flowmem.store.postgres", "langchain_postgres"),
    "writers": ("flowmem.service",),
}
"""What each bench imports that costs (its frameworks, flowmem's modules): the fork
server imports these once before forking the bench's run (a missing name costs only time)."""


def bench_lib(name: str) -> ModuleType:
    """bench/lib/<name>.py, loaded by path."""
    spec = importlib.util.spec_from_file_location(f"bench_lib_{name}", BENCH / "lib" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_bench(name: str, out: Path, *options: str) -> tuple[dict[str, Any], str]:
    """Run ``bench/<name>.py --quick --json out`` (exit 0 required); its JSON and stdout."""
    done = run_script(name, "--quick", "--json", str(out), *options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def run_script(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python bench/<name>.py ARGV``, its output captured, forked with ``PRELOAD[name]`` imported."""
    return forked.run_script(BENCH / f"{name}.py", argv, PRELOAD.get(name, ()), timeout=240)


def assert_common(found: dict[str, Any], bench: str, printed: str) -> None:
    """The shared part of every bench's JSON; each database's durability printed too."""
    assert found["bench"] == bench and found["quick"] is True
    assert found["command"].startswith(f"python bench/{bench}.py --quick")
    for key in ("date", "commit", "machine", "python", "sqlite"):
        assert found[key], key
    assert "flowmem" in found["versions"]
    assert found["targets"], "no target recorded"
    for target in found["targets"]:
        assert target["label"] and target["met"] in (True, False), target
    assert found["targets_met"] is None  # a quick run is never judged
    for name, entry in found["durability"].items():
        assert f"durability: {name}: {entry['label']}" in printed, name
        assert isinstance(entry["durable"], bool), name
        if entry["backend"] == "sqlite":
            assert entry["journal_mode"] and entry["synchronous"], name
        if entry["backend"] == "postgresql":
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                assert entry[setting] in ("on", "off", "local", "remote_write"), (name, setting)


def assert_wal_full(entry: dict[str, Any], name: str = "") -> None:
    """A SQLite database at flowmem's default durability (WAL, ``FULL``), as it reports it."""
    assert entry["backend"] == "sqlite", name
    assert (entry["journal_mode"], entry["synchronous"]) == ("wal", "FULL"), name
    assert entry["durable"] is True and "NOT DURABLE" not in entry["label"], name


def postgres_or_none(request: pytest.FixtureRequest) -> str | None:
    """The session's PostgreSQL URL, or None where no server binaries exist outside CI."""
    try:
        return str(request.getfixturevalue("postgres_url"))
    except pytest.skip.Exception:
        return None


def server_binaries() -> bool:
    """Whether a bench can start a throwaway server here; fails in CI, where one is required."""
    try:
        bench_lib("pgserver").bindir()
    except SystemExit:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL server binaries: required in CI")
        return False
    return True
