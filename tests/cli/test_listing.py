"""``flowmem --help`` lists every command without importing one, and lists what importing them would.

The listing's seam is ``LazyGroup.lists_lazily`` (decision 0187): off, click lists each
command by importing it (the plain path). The summaries are checked against the imported
commands at every width; a command's ``needs`` against its module's imports: with any
one of them missing the module fails to import (so the listing's "(needs …)" is right),
and with every package outside them, their dependencies and the base install missing it
imports (so its summary is right), whatever else is installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement

from flowmem.cli import COMMANDS, LazyGroup, cli, listing_entry

WITH_NEEDS = sorted(name for name, entry in COMMANDS.items() if entry.needs)


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """List commands as click does, importing each one."""
    monkeypatch.setattr(LazyGroup, "lists_lazily", False)


@pytest.mark.parametrize("width", [30, 50, 80, 120, 250])
def test_the_listing_is_the_plain_paths_at_every_width(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    lazy = CliRunner().invoke(cli, ["--help"], terminal_width=width)
    _plain(monkeypatch)
    plain = CliRunner().invoke(cli, ["--help"], terminal_width=width)
    assert lazy.exit_code == plain.exit_code == 0
    assert lazy.output == plain.output


def test_each_summary_shortens_as_its_commands_help_does() -> None:
    for name in COMMANDS:
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and not command.hidden and not command.deprecated
        for limit in range(3, 160):
            assert listing_entry(name).get_short_help_str(limit) == command.get_short_help_str(
                limit
            ), (name, limit)


def test_a_missing_need_is_listed_as_the_plain_path_lists_it() -> None:
    """In a fresh interpreter where one need of each command cannot be imported (as if no extra were installed)."""
    blocked = ("uvicorn", "jsonschema", "mcp")
    lazy, plain = json.loads(_run(
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from flowmem.cli import LazyGroup, cli\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        "lazy = CliRunner().invoke(cli, ['--help']).output\n"
        "LazyGroup.lists_lazily = False\n"
        "print(json.dumps([lazy, CliRunner().invoke(cli, ['--help']).output]))\n"
    ))  # fmt: skip
    assert lazy == plain
    assert lazy.count("(needs pip install") == len(WITH_NEEDS)


def _run(code: str) -> str:
    """Run ``code`` in a fresh interpreter; its stdout (it must exit 0)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_help_imports_no_command() -> None:
    loaded = json.loads(_run(
        "import json, sys\n"
        "from flowmem.cli import cli\n"
        "assert cli.main(['--help'], standalone_mode=False) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    ).splitlines()[-1])  # fmt: skip
    assert not {entry.module for entry in COMMANDS.values()} & set(loaded)
    assert not [
        name for name in loaded if name.split(".")[0] in ("fastapi", "uvicorn", "mcp", "jsonschema")
    ]


# In a fresh interpreter: every name of BLOCKED made unimportable, then for each case (a module and
# more names to block) a forked child imports the modules; prints per case "ok" or the first missing name.
IMPORTS = """
import json, os, sys
blocked, cases = json.loads(sys.argv[1])
for name in blocked:
    sys.modules[name] = None
found = []
for modules, more in cases:
    read, write = os.pipe()
    if os.fork() == 0:
        for name in more:
            sys.modules[name] = None
        try:
            for module in modules:
                __import__(module)
        except ImportError as exc:
            os.write(write, str(exc.name).encode())
        else:
            os.write(write, b"ok")
        os._exit(0)
    os.close(write)
    found.append(os.read(read, 1000).decode())
    os.wait()
print(json.dumps(found))
"""


def _imports(blocked: set[str], cases: list[tuple[list[str], tuple[str, ...]]]) -> list[str]:
    """Per case (modules, more names blocked): 'ok' if they import with those missing too, else the top-level name missing."""
    done = subprocess.run([sys.executable, "-c", IMPORTS, json.dumps([sorted(blocked), cases])],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [name.split(".")[0] for name in json.loads(done.stdout)]


def _key(name: str) -> str:
    """A distribution's normalized name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[Requirement]) -> set[str]:
    """The distributions ``roots`` need, their dependencies' too (extras followed, other markers as here)."""
    found: set[str] = set()
    todo = [(root, set(root.extras)) for root in roots]
    while todo:
        requirement, extras = todo.pop()
        key = _key(requirement.name)
        if key in found and not extras:
            continue
        found.add(key)
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in distribution.requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": e}) for e in extras | {""}
            ):
                todo.append((needed, set(needed.extras)))
    return found


@functools.cache
def _owners() -> dict[str, list[str]]:
    """Each installed top-level module's distributions."""
    return importlib.metadata.packages_distributions()


def _blocked_outside(needs: tuple[str, ...]) -> set[str]:
    """Every installed top-level module but those of the base install's and ``needs``' distributions."""
    owners = _owners()
    base = [
        Requirement(r) for r in importlib.metadata.requires("flowmem") or [] if "extra ==" not in r
    ]
    roots = base + [Requirement(owners[module][0]) for module in needs]
    kept = _closure(roots) | {"flowmem"}
    return {
        module for module, distributions in owners.items()
        if module.isidentifier() and not module.startswith("__editable__")
        and not {_key(d) for d in distributions} & kept
    }  # fmt: skip


@pytest.mark.parametrize("needs", sorted({entry.needs for entry in COMMANDS.values()}), ids=str)
def test_each_command_imports_with_its_needs_alone_and_not_without_any_one(
    needs: tuple[str, ...],
) -> None:
    """With every package but the base install's and ``needs``' closure missing, whatever else is installed."""
    blocked = _blocked_outside(needs)
    assert {"langgraph", "psycopg", "agents", "google"} <= blocked  # no command needs them
    if not needs:
        assert {"fastapi", "uvicorn", "mcp", "jsonschema", "httpx"} <= blocked
    modules = sorted({entry.module for entry in COMMANDS.values() if entry.needs == needs})
    cases = [(modules, ()), *(([module], (need,)) for module in modules for need in needs)]
    found = _imports(blocked, cases)
    assert found == [("ok" if not more else more[0]) for _, more in cases], list(
        zip(cases, found, strict=True)
    )
