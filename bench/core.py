"""Benchmark of the pure core: ``normalize`` and ``check_sendable`` against deepagents.

Run with ``make bench`` (not part of the tests). Generates 1,000- and 10,000-message
histories with tool calls, crashes (calls never answered), retries (a turn
re-declaring its ids, a result sent twice), orphan and late results, system rows
anywhere and both id spellings; then measures, best of several repeats:

- ``flowmem.core.normalize`` (all four MEM-5 steps),
- ``flowmem.core.check_sendable``,
- deepagents' ``PatchToolCallsMiddleware.before_agent`` (which only patches dangling
  calls) on the same histories, converted to LangChain messages outside the timing.

Targets (issue 2 §5): normalize at least as fast per message as the middleware, and
linear: the 10,000-message time within 1.3x of ten times the 1,000-message time.

Method: every timed sample covers 10,000 messages — one history of 10,000, or ten
distinct histories of 1,000 (different seeds) — so memory use and cache pressure
are alike and only the history length differs. Times are per history, the best of
``--repeats`` samples of CPU time; the three functions take turns sample by sample.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

# Run as ``python bench/core.py``, this folder is first on sys.path, where a sibling
# module (bench/http.py) would shadow the standard library's ``http`` that the
# deepagents / LangChain imports need. Drop it: nothing here imports a sibling.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from flowmem.core import call_ids, check_sendable, normalize, result_id

Row = dict[str, Any]


def generate(size: int, seed: int = 7) -> list[Row]:
    """Return a flat history of exactly ``size`` messages with every kind of damage."""
    rng = random.Random(seed)
    rows: list[Row] = [{"role": "system", "content": "You are a careful assistant."}]
    next_id = 0
    pending_late: list[str] = []
    while len(rows) < size:
        rows.append({"role": "user", "content": f"question {len(rows)}"})
        kind = rng.random()
        calls = rng.randint(1, 3)
        ids = [f"call_{next_id + i}" for i in range(calls)]
        next_id += calls
        spelling = "id" if rng.random() < 0.5 else "tool_call_id"
        turn = {
            "role": "assistant",
            "content": "" if rng.random() < 0.7 else "let me check",
            "tool_calls": [
                {
                    spelling: cid,
                    "type": "function",
                    "function": {"name": "search", "arguments": "{}"},
                }
                for cid in ids
            ],
        }
        rows.append(turn)
        if kind < 0.15:  # crash: no result at all, the loop died
            pass
        elif kind < 0.25:  # crash, and the results arrive late, after the next user turn
            pending_late.extend(ids)
        else:
            for cid in ids:
                rows.append({"role": "tool", "content": f"result of {cid}", "tool_call_id": cid})
            if kind < 0.35:  # retry: the same turn and a result again
                rows.append(dict(turn))
                rows.append({"role": "tool", "content": "again", "tool_call_id": ids[0]})
        if pending_late and rng.random() < 0.5:
            rows.append({"role": "user", "content": "still there?"})
            for cid in pending_late:
                rows.append({"role": "tool", "content": f"late {cid}", "tool_call_id": cid})
            pending_late = []
        if rng.random() < 0.05:  # orphan result
            rows.append({"role": "tool", "content": "stray", "tool_call_id": f"ghost_{len(rows)}"})
        if rng.random() < 0.03:  # a system row in the middle
            rows.append({"role": "system", "content": "Be brief."})
        if rng.random() < 0.1:
            rows.append({"role": "assistant", "content": f"answer {len(rows)}"})
    return rows[:size]


def to_langchain(rows: list[Row]) -> list[Any]:
    """Convert flat rows to LangChain messages (done once, outside the timed part)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for row in rows:
        role, content = row["role"], row["content"]
        if role == "system":
            out.append(SystemMessage(content=content))
        elif role == "user":
            out.append(HumanMessage(content=content))
        elif role == "assistant":
            calls = [{"name": "search", "args": {}, "id": cid} for cid in call_ids(row)]
            out.append(AIMessage(content=content, tool_calls=calls))
        else:
            out.append(ToolMessage(content=content, tool_call_id=result_id(row) or ""))
    return out


def best_times(fns: dict[str, Callable[[], object]], repeats: int, per: int) -> dict[str, float]:
    """Return the best time of each function divided by ``per``, with the GC paused.

    The functions take turns (one sample of each per round), so a burst of other
    work on a shared machine hits all of them alike; the clock is this process's
    CPU time (``time.process_time``), so time spent descheduled counts against
    none of them.
    """
    best = dict.fromkeys(fns, float("inf"))
    gc.collect()
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.disable()
            try:
                start = time.process_time()
                fn()
                elapsed = (time.process_time() - start) / per
            finally:
                gc.enable()
            best[name] = min(best[name], elapsed)
    return best


def _each(fn: Callable[[Any], object], items: list[Any]) -> Callable[[], None]:
    """Return a call of ``fn`` on every item in turn."""

    def run() -> None:
        for item in items:
            fn(item)

    return run


def middleware_runner(rows: list[Row]) -> Callable[[], object] | None:
    """Return a call of PatchToolCallsMiddleware on ``rows``, or None if deepagents is absent."""
    try:
        from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware
    except ImportError as exc:
        print(f"deepagents is not importable ({exc}); install the bench extra", file=sys.stderr)
        return None
    middleware = PatchToolCallsMiddleware()
    state = {"messages": to_langchain(rows)}
    return lambda: middleware.before_agent(state, None)  # type: ignore[arg-type]


def timed_calls(histories: list[list[Row]]) -> dict[str, Callable[[], object]]:
    """The calls timed on ``histories``: normalize, check_sendable and, if installed, deepagents."""
    fns: dict[str, Callable[[], object]] = {
        "normalize": _each(normalize, histories),
        "check_sendable": _each(check_sendable, histories),
    }
    runners = [middleware_runner(history) for history in histories]
    if all(runner is not None for runner in runners):
        fns["deepagents PatchToolCalls"] = _each(lambda run: run(), runners)
    return fns


def section(sizes: tuple[int, ...] = (1_000, 10_000), repeats: int = 3, samples: int = 7) -> bool:
    """Print the normalization table of ``bench/store.py``: ``repeats`` runs, median (min–max).

    Each repeat is ``best_times`` (best of ``samples``) over the same histories as
    ``main``; the ratio is deepagents' time ÷ flowmem's (above 1: flowmem is faster).
    Returns False when a target is missed: parity (ratio >= 1, medians) for
    ``normalize`` and linear growth (<= 1.3) at the largest size.
    """
    import statistics

    total = max(sizes)
    times: dict[tuple[str, int], list[float]] = {}
    for size in sizes:
        count = max(1, total // size)
        histories = [generate(size, seed=7 + n) for n in range(count)]
        fns = timed_calls(histories)
        for _ in range(max(1, repeats)):
            for name, seconds in best_times(fns, max(1, samples), count).items():
                times.setdefault((name, size), []).append(seconds)

    def spread(values: list[float], fmt: str) -> str:
        low, mid, high = min(values), statistics.median(values), max(values)
        return f"{fmt.format(mid)} ({fmt.format(low)}–{fmt.format(high)})"

    reference = "deepagents PatchToolCalls"
    print(
        f"\n## Normalization: ms per history, median (min–max) of {repeats} repeats "
        f"(each the best of {samples} CPU-time samples)\n"
    )
    print("| operation | messages | ms | flowmem / deepagents |")
    print("|---|---:|---:|---:|")
    ok = True
    for size in sizes:
        theirs = times.get((reference, size))
        for name in ("normalize", "check_sendable", reference):
            if (name, size) not in times:
                continue
            mine = times[(name, size)]
            ratio = "—"
            if theirs is not None and name != reference:
                ratios = [t / m for t, m in zip(theirs, mine, strict=True)]
                ratio = spread(ratios, "{:.2f}")
                ok &= name != "normalize" or statistics.median(ratios) >= 1.0
            print(f"| {name} | {size:,} | {spread([m * 1000 for m in mine], '{:,.2f}')} | {ratio} |")
    small, large = min(sizes), max(sizes)
    if small != large:
        for name in ("normalize", "check_sendable"):
            growth = statistics.median(times[(name, large)]) / (
                large / small * statistics.median(times[(name, small)])
            )
            print(f"\n{name} growth, {large:,} ÷ ({large // small} x {small:,}): {growth:.2f}", end="")
            ok &= name != "normalize" or growth <= 1.3
        print()
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25, help="best of N samples (default 25)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    args = parser.parse_args(argv)

    # Every sample covers the same number of messages: the largest size once, or
    # that many messages split into distinct histories of a smaller size. Memory
    # and caches are then alike across sizes and only the history length differs.
    total = max(args.sizes)
    results: dict[int, dict[str, float]] = {}
    for size in args.sizes:
        count = max(1, total // size)
        histories = [generate(size, seed=7 + n) for n in range(count)]
        rows = histories[0]
        normalized = normalize(rows)
        assert not check_sendable(normalized.messages), "normalize output must be sendable"
        fns = timed_calls(histories)
        timing = best_times(fns, max(3, args.repeats), count)
        results[size] = timing
        print(
            f"history of {size:,} messages: {len(check_sendable(rows))} violations before, "
            f"dropped {normalized.dropped}, {len(normalized.messages):,} rows after normalize"
        )

    print()
    header = f"{'operation':<28}{'messages':>10}{'best ms':>11}{'msgs/s':>14}{'vs middleware':>15}"
    print(header)
    print("-" * len(header))
    for size, timing in results.items():
        reference = timing.get("deepagents PatchToolCalls")
        for name, seconds in timing.items():
            ratio = f"{reference / seconds:.2f}x" if reference else "n/a"
            print(
                f"{name:<28}{size:>10,}{seconds * 1000:>11.2f}{size / seconds:>14,.0f}{ratio:>15}"
            )
    print()

    ok = True
    sizes = sorted(results)
    for size in sizes:
        reference = results[size].get("deepagents PatchToolCalls")
        if reference is not None:
            speed = reference / results[size]["normalize"]
            verdict = "ok" if speed >= 1 else "MISSED"
            ok &= speed >= 1
            print(
                f"target normalize >= middleware per message at {size:,}: {speed:.2f}x  {verdict}"
            )
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        scale = large / small
        for name in ("normalize", "check_sendable", "deepagents PatchToolCalls"):
            if name not in results[large]:
                continue
            growth = results[large][name] / (scale * results[small][name])
            if name == "deepagents PatchToolCalls":
                print(f"for reference, the middleware's own growth: {growth:.2f}")
                continue
            verdict = "ok" if growth <= 1.3 else "MISSED"
            ok &= growth <= 1.3 or name != "normalize"
            print(
                f"target linear {name}: {large:,} time / ({scale:g} x {small:,} time) = "
                f"{growth:.2f} (<= 1.30)  {verdict}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
