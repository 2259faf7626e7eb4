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

Every measurement, the machine, versions, commit and the targets go to
``bench/results/core.json`` beside the table (``--json PATH``: elsewhere);
``--quick`` (histories of 100 and 1,000, 3 samples) is a smoke run, never judged.

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
# deepagents / LangChain imports need. Drop it; the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json

from flowmem.core import call_ids, check_sendable, normalize, result_id

PACKAGES = ("deepagents", "langchain-core")
REFERENCE = "deepagents PatchToolCalls"

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


def best_times(
    fns: dict[str, Callable[[], object]],
    repeats: int,
    per: int,
    samples: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Return the best time of each function divided by ``per``, with the GC paused.

    The functions take turns (one sample of each per round), so a burst of other
    work on a shared machine hits all of them alike; the clock is this process's
    CPU time (``time.process_time``), so time spent descheduled counts against
    none of them. ``samples`` collects every sample (divided by ``per``) per name.
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
            if samples is not None:
                samples.setdefault(name, []).append(elapsed)
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


def section(
    targets: report_json.Targets,
    sizes: tuple[int, ...] = (1_000, 10_000),
    repeats: int = 3,
    samples: int = 7,
) -> dict[str, Any]:
    """Print the normalization table of ``bench/store.py``: ``repeats`` runs, median (min–max).

    Each repeat is ``best_times`` (best of ``samples``) over the same histories as
    ``main``; the ratio is deepagents' time ÷ flowmem's (above 1: flowmem is faster).
    Checks the targets in ``targets``: parity (ratio >= 1, medians) for ``normalize``
    and linear growth (<= 1.3) at the largest size. Returns every repeat's time.
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

    print(
        f"\n## Normalization: ms per history, median (min–max) of {repeats} repeats "
        f"(each the best of {samples} CPU-time samples)\n"
    )
    print("| operation | messages | ms | flowmem / deepagents |")
    print("|---|---:|---:|---:|")
    parity: dict[int, float] = {}
    for size in sizes:
        theirs = times.get((REFERENCE, size))
        for name in ("normalize", "check_sendable", REFERENCE):
            if (name, size) not in times:
                continue
            mine = times[(name, size)]
            ratio = "—"
            if theirs is not None and name != REFERENCE:
                ratios = [t / m for t, m in zip(theirs, mine, strict=True)]
                ratio = spread(ratios, "{:.2f}")
                if name == "normalize":
                    parity[size] = statistics.median(ratios)
            print(
                f"| {name} | {size:,} | {spread([m * 1000 for m in mine], '{:,.2f}')} | {ratio} |"
            )
    small, large = min(sizes), max(sizes)
    growth: dict[str, float] = {}
    if small != large:
        for name in ("normalize", "check_sendable"):
            growth[name] = statistics.median(times[(name, large)]) / (
                large / small * statistics.median(times[(name, small)])
            )
            print(
                f"\n{name} growth, {large:,} ÷ ({large // small} x {small:,}): {growth[name]:.2f}",
                end="",
            )
        print()
    for size, ratio in parity.items():
        targets.check(f"normalization: normalize, deepagents ÷ flowmem at {size:,}", ratio, 1.0)
    if "normalize" in growth:
        label = f"normalization: normalize growth, {large:,} ÷ ({large // small} x {small:,})"
        targets.check(label, growth["normalize"], 1.3, at_most=True)
    return {
        "sizes": list(sizes),
        "repeats": repeats,
        "samples": samples,
        "best_s": _by_name(times),
        "growth": growth,
    }


def _by_name(times: dict[tuple[str, int], Any]) -> dict[str, dict[str, Any]]:
    """``{(name, size): v}`` as ``{name: {"size": v}}`` (JSON keys are strings)."""
    out: dict[str, dict[str, Any]] = {}
    for (name, size), value in times.items():
        out.setdefault(name, {})[str(size)] = value
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; exit 1 when a target is missed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25, help="best of N samples (default 25)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    report_json.add_arguments(parser, "core", "histories of 100 and 1,000, 3 samples")
    args = parser.parse_args(argv)
    sizes = [100, 1_000] if args.quick else args.sizes
    repeats = 3 if args.quick else max(3, args.repeats)
    meta = report_json.environment(PACKAGES)
    report_json.describe(meta, {})

    # Every sample covers the same number of messages: the largest size once, or
    # that many messages split into distinct histories of a smaller size. Memory
    # and caches are then alike across sizes and only the history length differs.
    total = max(sizes)
    results: dict[int, dict[str, float]] = {}
    samples: dict[int, dict[str, list[float]]] = {}
    histories_of: dict[str, dict[str, int]] = {}
    for size in sizes:
        count = max(1, total // size)
        histories = [generate(size, seed=7 + n) for n in range(count)]
        rows = histories[0]
        normalized = normalize(rows)
        assert not check_sendable(normalized.messages), "normalize output must be sendable"
        fns = timed_calls(histories)
        samples[size] = {}
        timing = best_times(fns, repeats, count, samples[size])
        results[size] = timing
        histories_of[str(size)] = {
            "histories": count,
            "violations_before": len(check_sendable(rows)),
            "dropped": normalized.dropped,
            "rows_after": len(normalized.messages),
        }
        print(
            f"history of {size:,} messages: {len(check_sendable(rows))} violations before, "
            f"dropped {normalized.dropped}, {len(normalized.messages):,} rows after normalize"
        )

    print()
    header = f"{'operation':<28}{'messages':>10}{'best ms':>11}{'msgs/s':>14}{'vs middleware':>15}"
    print(header)
    print("-" * len(header))
    for size, timing in results.items():
        reference = timing.get(REFERENCE)
        for name, seconds in timing.items():
            ratio = f"{reference / seconds:.2f}x" if reference else "n/a"
            print(
                f"{name:<28}{size:>10,}{seconds * 1000:>11.2f}{size / seconds:>14,.0f}{ratio:>15}"
            )
    print()

    targets = report_json.Targets(args.quick)
    ordered = sorted(results)
    for size in ordered:
        reference = results[size].get(REFERENCE)
        if reference is not None:
            speed = reference / results[size]["normalize"]
            targets.check(f"normalize >= middleware per message at {size:,} (x)", speed, 1.0)
    growth: dict[str, float] = {}
    if len(ordered) >= 2:
        small, large = ordered[0], ordered[-1]
        scale = large / small
        for name in ("normalize", "check_sendable", REFERENCE):
            if name not in results[large]:
                continue
            growth[name] = results[large][name] / (scale * results[small][name])
            label = f"linear {name}: {large:,} time / ({scale:g} x {small:,} time)"
            if name == "normalize":
                targets.check(label, growth[name], 1.3, at_most=True)
            else:  # reported beside, not a target
                print(f"  (reported)  {label}: {growth[name]:.2f}")
    found = {
        "sizes": sizes,
        "repeats": repeats,
        "histories": histories_of,
        "best_s": {str(n): timing for n, timing in results.items()},
        "samples_s": {str(n): found for n, found in samples.items()},
        "growth": growth,
    }
    report_json.write(args.json, "core", argv, meta, {}, targets.items, found, args.quick)
    return 0 if args.quick or not targets.failed else 1


if __name__ == "__main__":
    sys.exit(main())
