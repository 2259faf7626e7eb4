"""Benchmark of the provider formats: ``to_openai`` / ``to_anthropic`` / ``to_responses`` / ``to_gemini`` beside LangChain's converters.

Run with ``python bench/formats.py`` (not part of the tests). Generates a rich-content
history of 1,000 rows (issue 26 §4): a system prompt, user turns of text and of
text with a base64 image, assistant turns declaring 1–3 tool calls with JSON
arguments (with and without text), tool results as text and as text parts, and
final answers. flowmem converts it as the store hands it back (stored rows, the
shape ``Memory.load`` returns and ``GET …?format=`` converts) and as flat rows;
the peers convert the same history as LangChain messages, built once outside the
timing, with LangChain's own spelling of an image (an ``image_url`` data URL).

The peer of each format is the converter LangChain runs before it calls that
provider (none of them normalizes):

- ``to_openai``: ``langchain_core.messages.convert_to_openai_messages``;
- ``to_anthropic``: ``langchain_anthropic.chat_models._format_messages``;
- ``to_responses``: ``langchain_openai.chat_models.base._construct_responses_api_input``;
- ``to_gemini``: ``langchain_google_genai.chat_models._parse_chat_history``.

Every format is also compared with ``convert_to_openai_messages``, langchain-core's
converter, the reference issue 26 measured all formats against. Targets: each
``to_X`` within 1.3x of its peer and of langchain-core's converter (flowmem time ÷
peer time, the median of the runs), on stored rows.

Method: one process; ``--runs`` runs, each the best of ``--samples`` CPU-time
samples of every function, the functions taking turns sample by sample (GC paused
while a sample runs); a ratio is computed per run, and the median and the minimum
over the runs are reported. Where the formats have a plain oracle
(``flowmem.formats.plain``), its time is measured beside the default path.
Every measurement goes to ``bench/results/formats.json`` (``--json PATH``);
``--quick`` (100 rows, 1 run of 3 samples) is a smoke run, never judged.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# Run as ``python bench/formats.py``, this folder is first on sys.path, where a sibling
# module (bench/http.py) would shadow the standard library's ``http``. Drop it; the
# benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json

from flowmem import formats
from flowmem.core import to_row

PACKAGES = (
    "langchain-core",
    "langchain-anthropic",
    "langchain-openai",
    "langchain-google-genai",
)
FORMATS = ("openai", "anthropic", "responses", "gemini")
CORE = "langchain-core convert_to_openai_messages"
PEERS = {
    "openai": ("langchain_core.messages", "convert_to_openai_messages", {}),
    "anthropic": ("langchain_anthropic.chat_models", "_format_messages", {"model": None}),
    "responses": ("langchain_openai.chat_models.base", "_construct_responses_api_input", {}),
    "gemini": ("langchain_google_genai.chat_models", "_parse_chat_history", {}),
}
GOAL = 1.3
# a 1x1 PNG, base64
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

Row = dict[str, Any]


def generate(size: int, seed: int = 7) -> list[Row]:
    """Return a sendable rich-content history of exactly ``size`` flat rows."""
    rng = random.Random(seed)
    rows: list[Row] = [{"role": "system", "content": "You are a careful assistant."}]
    next_id = 0
    while len(rows) < size:
        if rng.random() < 0.25:
            question = f"what is in this picture ({len(rows)})?"
            image = {"type": "image", "data": PNG, "media_type": "image/png"}
            rows.append({"role": "user", "content": [{"type": "text", "text": question}, image]})
        else:
            rows.append({"role": "user", "content": f"question {len(rows)}: the weather in Lisbon?"})
        ids = [f"call_{next_id + n}" for n in range(rng.randint(1, 3))]
        next_id += len(ids)
        calls = [
            {"tool_call_id": cid, "name": "search", "args": {"query": f"weather {cid}", "limit": 5}}
            for cid in ids
        ]
        text = "" if rng.random() < 0.5 else "Let me check."
        rows.append({"role": "assistant", "content": text, "tool_calls": calls})
        for cid in ids:
            result = f"sunny, 21 °C ({cid})"
            content: Any = [{"type": "text", "text": result}] if rng.random() < 0.3 else result
            rows.append({"role": "tool", "content": content, "tool_call_id": cid})
        rows.append({"role": "assistant", "content": f"It is sunny ({len(rows)})."})
    rows = rows[:size]
    while rows[-1]["role"] == "assistant" and rows[-1].get("tool_calls"):
        rows.pop()  # end on a whole turn: every call answered
    return rows


def to_langchain(rows: list[Row]) -> list[Any]:
    """The same history as LangChain messages (built once, outside the timed part)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    def content(value: Any) -> Any:
        if isinstance(value, str):
            return value
        return [
            {"type": "text", "text": part["text"]}
            if part["type"] == "text"
            else {
                "type": "image_url",
                "image_url": {"url": f"data:{part['media_type']};base64,{part['data']}"},
            }
            for part in value
        ]

    out: list[Any] = []
    for row in rows:
        role, body = row["role"], content(row["content"])
        if role == "system":
            out.append(SystemMessage(content=body))
        elif role == "user":
            out.append(HumanMessage(content=body))
        elif role == "assistant":
            calls = [
                {"name": c["name"], "args": c["args"], "id": c["tool_call_id"]}
                for c in row.get("tool_calls", [])
            ]
            out.append(AIMessage(content=body, tool_calls=calls))
        else:
            out.append(ToolMessage(content=body, tool_call_id=row["tool_call_id"]))
    return out


def peer(fmt: str) -> Callable[..., Any] | None:
    """The peer converter of ``fmt``, or None when its package is not installed."""
    module, name, options = PEERS[fmt]
    try:
        fn = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        print(f"{module} is not importable ({exc}): no peer for {fmt}", file=sys.stderr)
        return None
    return lambda messages: fn(messages, **options)


def timed_calls(rows: list[Row]) -> dict[str, Callable[[], object]]:
    """Every call timed: flowmem on stored and flat rows (and plain, if any), each peer."""
    stored = [to_row(row, now=1_700_000_000 + n) for n, row in enumerate(rows)]
    messages = to_langchain(rows)
    plain = _plain_module()
    fns: dict[str, Callable[[], object]] = {}
    for fmt in FORMATS:
        convert = getattr(formats, f"to_{fmt}")
        fns[f"to_{fmt} stored"] = lambda c=convert: c(stored)
        fns[f"to_{fmt} flat"] = lambda c=convert: c(rows)
        if plain is not None:
            oracle = getattr(plain, f"to_{fmt}")
            fns[f"to_{fmt} plain stored"] = lambda c=oracle: c(stored)
        found = peer(fmt)
        if found is not None:
            fns[f"peer {fmt}"] = lambda f=found: f(messages)
    core = peer("openai")
    if core is not None:
        fns[CORE] = lambda: core(messages)
    return fns


def _plain_module() -> Any:
    """``flowmem.formats.plain`` (the oracle path) when this checkout has it, else None."""
    try:
        return importlib.import_module("flowmem.formats.plain")
    except ImportError:
        return None


def best_times(fns: dict[str, Callable[[], object]], samples: int) -> dict[str, float]:
    """The best CPU time of each function over ``samples`` rounds, the functions taking turns."""
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():
        fn()  # warm up: imports, caches
    gc.collect()
    for _ in range(samples):
        for name, fn in fns.items():
            gc.disable()
            try:
                start = time.process_time()
                fn()
                best[name] = min(best[name], time.process_time() - start)
            finally:
                gc.enable()
    return best


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """``median (min–max)`` of ``values``."""
    if len(values) == 1:
        return fmt.format(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}–{fmt.format(high)})"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; exit 1 when a target is missed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000, help="history length (default 1,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--samples", type=int, default=40, help="best of N per run (default 40)")
    report_json.add_arguments(parser, "formats", "a history of 100 rows, 1 run of 3 samples")
    args = parser.parse_args(argv)
    size, runs, samples = (100, 1, 3) if args.quick else (args.rows, args.runs, args.samples)
    meta = report_json.environment(PACKAGES)
    report_json.describe(meta, {})

    rows = generate(size)
    fns = timed_calls(rows)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, runs)):
        for name, seconds in best_times(fns, max(1, samples)).items():
            times[name].append(seconds)

    print(f"\n## Provider formats: {len(rows):,} rich rows, ms per history and flowmem ÷ peer")
    print(f"median (min–max) of {runs} runs, each the best of {samples} CPU-time samples\n")
    print(f"| format | flowmem call | ms | peer ms | ÷ peer | ÷ {CORE} |")
    print("|---|---|---:|---:|---:|---:|")
    ratios: dict[str, dict[str, list[float]]] = {}
    for fmt in FORMATS:
        theirs, core = times.get(f"peer {fmt}"), times.get(CORE)
        for shape in ("stored", "flat", "plain stored"):
            name = f"to_{fmt} {shape}"
            if name not in times:
                continue
            mine = times[name]
            found = ratios.setdefault(name, {})
            cells = []
            for key, reference in (("peer", theirs), ("core", core)):
                if reference is None:
                    cells.append("—")
                    continue
                found[key] = [m / t for m, t in zip(mine, reference, strict=True)]
                cells.append(spread(found[key]))
            peer_ms = spread([t * 1000 for t in theirs]) if theirs else "—"
            ms = spread([m * 1000 for m in mine])
            print(f"| {fmt} | {name} | {ms} | {peer_ms} | {cells[0]} | {cells[1]} |")
    if CORE in times:
        print(f"\n{CORE}: {spread([t * 1000 for t in times[CORE]])} ms")
    print()

    targets = report_json.Targets(args.quick)
    for fmt in FORMATS:
        found = ratios.get(f"to_{fmt} stored", {})
        for key, label in (("peer", f"its peer {PEERS[fmt][1]}"), ("core", CORE)):
            if key in found:
                value = statistics.median(found[key])
                targets.check(f"to_{fmt} ÷ {label} (median)", value, GOAL, at_most=True)
    results = {
        "rows": len(rows),
        "runs": runs,
        "samples": samples,
        "peers": {fmt: ".".join(PEERS[fmt][:2]) for fmt in FORMATS},
        "best_s": times,
        "ratios": ratios,
    }
    report_json.write(args.json, "formats", argv, meta, {}, targets.items, results, args.quick)
    return 0 if args.quick or not targets.failed else 1


if __name__ == "__main__":
    sys.exit(main())
