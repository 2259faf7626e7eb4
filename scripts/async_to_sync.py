"""Write flowmem's sync client from its async one: ``client/sync.py`` from ``client/aio.py``.

Little is left to generate: the methods are declared once for both clients
(``client/methods.py``, ``client/memory_methods.py``) and what a request, a retry or an
operation of several calls is, is written once as steps (``client/steps.py``); ``aio.py``
only performs those steps (sends, sleeps, awaits), and ``sync.py`` is that, not awaited.

    .venv/bin/python scripts/async_to_sync.py          # rewrite src/flowmem/client/sync.py
    .venv/bin/python scripts/async_to_sync.py --check  # exit 1 with the diff when it is stale

``make lint`` runs ``--check``. The transform reads tokens, not a syntax tree, so the
layout, comments and docstrings of ``aio.py`` are kept as they are:

- ``async def``, ``async with`` and ``async for`` lose ``async``; ``await x`` is ``x``;
- the names of ``NAMES`` are renamed (``AsyncClient`` is ``Client``, ``asyncio.sleep`` is
  ``time.sleep``, ...), in code and in the ````double-backquoted```` spans of docstrings
  and comments (prose is left alone, so write it true for both clients);
- the few statements that truly differ carry a marker on the line(s) just above them:
  ``# async only`` leaves the next statement (with its block) out of the sync file, and a
  run of ``# sync: <line>`` comments replaces it by those lines, at its indentation;

then ruff sorts the imports that renaming unsorted, and a header says the file is generated.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import itertools
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "src" / "flowmem" / "client"
SOURCE = CLIENT / "aio.py"
TARGET = CLIENT / "sync.py"
PAIRS = ((SOURCE, TARGET),)
COMMAND = "python scripts/async_to_sync.py"

# async spelling -> sync spelling (in httpx, collections.abc, flowmem.memory and ours)
NAMES = {
    "AsyncBaseTransport": "BaseTransport",
    "AsyncBase": "SyncBase",
    "AsyncClient": "Client",
    "AsyncIterator": "Iterator",
    "AsyncMemory": "Memory",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "asyncio": "time",  # the client uses asyncio only to sleep between retries
}


def header(source: Path = SOURCE) -> str:
    """The two lines a generated file opens with: where it comes from, how to make it again."""
    return (
        f"# Generated from src/flowmem/client/{source.name} by scripts/async_to_sync.py: do not edit.\n"
        f"# Change {source.name}, then run `{COMMAND}` (`make lint` fails while this file is stale).\n"
    )

_MARKER = re.compile(r"^[ \t]*# (?:sync: ?(?P<line>.*)|(?P<drop>async only))[ \t]*$")
_SPAN = re.compile(r"``(.+?)``")
_WORD = re.compile(r"\b(" + "|".join(map(re.escape, NAMES)) + r")\b")


def _words(text: str) -> str:
    """``text`` (code) with ``async``/``await`` dropped and the names of ``NAMES`` renamed."""
    return _WORD.sub(lambda m: NAMES[m.group(1)], re.sub(r"\b(?:async|await)\s+", "", text))


def _offsets(source: str) -> list[int]:
    """Where each line starts in ``source`` (index 1 is line 1, as tokens count)."""
    starts = [0, 0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _token_edits(source: str) -> list[tuple[int, int, str]]:
    """The (start, end, text) replacements that spell each token of ``source`` synchronously."""
    at = _offsets(source)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits = []
    for token, following in itertools.pairwise(tokens):
        start, end = at[token.start[0]] + token.start[1], at[token.end[0]] + token.end[1]
        if token.type == tokenize.NAME and token.string in ("async", "await"):
            if following.start[0] == token.end[0]:  # the blank after the keyword goes too
                end = at[following.start[0]] + following.start[1]
            edits.append((start, end, ""))
        elif token.type == tokenize.NAME and token.string in NAMES:
            edits.append((start, end, NAMES[token.string]))
        elif token.type in (tokenize.STRING, tokenize.COMMENT):
            spelled = _SPAN.sub(lambda m: f"``{_words(m.group(1))}``", token.string)
            if spelled != token.string:
                edits.append((start, end, spelled))
    return edits


def _marked(source: str) -> dict[int, tuple[int, list[str] | None]]:
    """Each marked statement: first line of its markers -> (its last line, its sync lines).

    ``None`` as the lines leaves the statement out. Raises ValueError for a marker that
    no statement follows.
    """
    lines = source.splitlines()
    statements: dict[int, ast.stmt] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            if first not in statements:  # ast.walk meets the outermost statement first
                statements[first] = node
    found: dict[int, tuple[int, list[str] | None]] = {}
    number = 0
    while number < len(lines):
        match = _MARKER.match(lines[number])
        if match is None:
            number += 1
            continue
        first, sync_lines, drop = number + 1, [], False
        while number < len(lines) and (match := _MARKER.match(lines[number])):
            drop = drop or match.group("drop") is not None
            if match.group("line") is not None:
                sync_lines.append(match.group("line"))
            number += 1
        node = statements.get(number + 1)
        if node is None or drop == bool(sync_lines):
            raise ValueError(
                f"line {first}: a marker must stand just above a statement, "
                "and be either `# async only` or `# sync: ...` lines"
            )
        indent = " " * node.col_offset
        found[first] = (
            node.end_lineno or node.lineno,
            None if drop else [indent + s for s in sync_lines],
        )
    return found


def _sorted_imports(code: str) -> str:
    """``code`` with its imports sorted as ruff sorts them (the project's isort settings)."""
    command = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--select",
        "I",
        "--fix",
        "--quiet",
        "--stdin-filename",
        str(TARGET),
        "-",
    ]
    done = subprocess.run(command, input=code, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"ruff could not sort the imports: {done.stderr or done.stdout}")
    return done.stdout


def translate(source: str) -> str:
    """The sync spelling of the async module ``source``, without the header or import order."""
    spelled = source
    for start, end, text in sorted(_token_edits(source), reverse=True):
        spelled = spelled[:start] + text + spelled[end:]
    lines = spelled.splitlines(keepends=True)  # the edits keep every line where it was
    out: list[str] = []
    number = 1
    marked = _marked(source)
    while number <= len(lines):
        if number in marked:
            last, sync_lines = marked[number]
            out.extend(line + "\n" for line in sync_lines or [])
            number = last + 1
            continue
        out.append(lines[number - 1])
        number += 1
    return "".join(out)


def generate(source: str | None = None, path: Path = SOURCE) -> str:
    """The text a generated file must have: the header, then ``path`` (or ``source``) translated."""
    text = path.read_text(encoding="utf-8") if source is None else source
    return header(path) + _sorted_imports(translate(text))


def stale(expected: str, target: Path = TARGET) -> str:
    """A unified diff from ``target`` to ``expected``; empty when the file is up to date."""
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    name = str(target.relative_to(ROOT)) if target.is_relative_to(ROOT) else str(target)
    diff = difflib.unified_diff(
        current.splitlines(keepends=True),
        expected.splitlines(keepends=True),
        f"{name} (checked in)",
        f"{name} (generated)",
    )
    return "".join(diff)


def main(argv: list[str] | None = None) -> int:
    """Rewrite each generated file, or with ``--check`` exit 1 when one differs from what it should be."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; fail on a diff")
    check = parser.parse_args(argv).check
    failed = 0
    for source, target in PAIRS:
        expected = generate(path=source)
        if not check:
            target.write_text(expected, encoding="utf-8")
            continue
        diff = stale(expected, target)
        if diff:
            sys.stdout.write(diff)
            print(
                f"\n{target.relative_to(ROOT)} is not what {source.name} generates: "
                f"run `{COMMAND}` (never edit it by hand).",
                file=sys.stderr,
            )
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
