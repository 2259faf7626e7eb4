"""LG6 (decision 0221): what grows in FlowmemSaver's own calls from a new thread to 1,000 messages.

usage: python langgraph-s61-lg6-parts.py ROUNDS [async|sync] [OUT.json]

A throwaway durable PostgreSQL (bench/lib/pgserver.py), the bench's graph (bench/langgraph.py)
on FlowmemSaver. Each round: a thread grown untimed to 900 messages, then, in turns (the order
alternating by round), its segment 900 -> 1,000 ("L"), a new thread's first segment 0 -> 100
("N", what the bench's "beside" ratio divides by) and that thread's second segment 100 -> 200
("M": a grown thread at 100, which reads a checkpoint at its invoke's start as L does).

Inside the saver's calls every part is timed with time.thread_time_ns in the calling thread
(wrappers on the instance; exclusive times: a part's children are subtracted), _plan's inner
pieces inline (a copy of _plan with clocks), the collector's passes inside the calls apart.
Reported per step (segment ÷ 100), min and median over the rounds.

Then the same calls are *replayed* on a fresh saver and database without LangGraph: every
put / put_writes / get_tuple of round 0's threads recorded as LangGraph made them (the same
message objects), replayed in order, REPLAYS times, each under new thread ids: the saver's
own work at 1,000 against at 100 with no LangGraph work (add_messages' pass over the list) and
no concurrent thread between the calls. "replay+pass": the same with add_messages run on the
step's list before each put, as LangGraph's loop does between the calls.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
assert spec.loader is not None
spec.loader.exec_module(lg)

import pgserver  # noqa: E402
import psycopg  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

import flowmem.integrations.langgraph.saver as sv  # noqa: E402
from flowmem.integrations.langgraph.durable import open_after  # noqa: E402
from flowmem.integrations.langgraph.lines import (  # noqa: E402
    LineHead,
    addresses,
    base_key,
    branch_key,
    is_message_list,
    reference,
    to_rows,
)
from flowmem.store.checkpoints import LineAppend, StoredBlob  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
MODE = sys.argv[2] if len(sys.argv) > 2 else "async"
OUT = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, f"langgraph-s61-lg6-parts-{MODE}.json")
REPLAYS = int(os.environ.get("LG6_REPLAYS", "6"))
BARE = bool(os.environ.get("LG6_BARE"))  # no clocks inside the calls (under callgrind)
MARK = bool(os.environ.get("LG6_MARK"))  # os.getppid() around each measured segment: callgrind --dump-before=*getppid*
clock = time.thread_time_ns
marks: list[str] = []


def mark(label: str) -> None:
    """A callgrind dump point: the dump made here holds what ran since the previous mark."""
    if MARK:
        marks.append(label)
        os.getppid()


class Parts:
    """Exclusive thread CPU per named part, summed; a thread-local stack subtracts children."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.count: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        self.local = threading.local()
        self.gc_ns = 0
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if not getattr(self.local, "stack", None):
            return
        if phase == "start":
            self.local.gc0 = clock()
        elif getattr(self.local, "gc0", None) is not None:
            spent = clock() - self.local.gc0
            self.local.gc0 = None
            with self.lock:
                self.gc_ns += spent

    def add(self, name: str, spent: int) -> None:
        """A leaf part timed inline: counted to it and subtracted from the enclosing part."""
        stack = getattr(self.local, "stack", None)
        if stack:
            stack[-1] += spent
        with self.lock:
            self.ns[name] += spent
            self.count[name] += 1

    def wrap(self, obj: Any, attr: str, name: str | None = None) -> None:
        """Time ``obj.attr`` (exclusive of wrapped parts inside it)."""
        fn = getattr(obj, attr)
        label = name or attr

        def wrapped(*a: Any, **kw: Any) -> Any:
            stack = getattr(self.local, "stack", None)
            if stack is None:
                stack = self.local.stack = []
            stack.append(0)
            t0 = clock()
            try:
                return fn(*a, **kw)
            finally:
                total = clock() - t0
                children = stack.pop()
                if stack:
                    stack[-1] += total
                with self.lock:
                    self.ns[label] += total - children
                    self.count[label] += 1
                    if not stack:
                        self.ns["=calls"] += total
                        self.count["=calls"] += 1

        setattr(obj, attr, wrapped)

    def reset(self) -> None:
        with self.lock:
            self.ns.clear()
            self.count.clear()
            self.gc_ns = 0

    def snapshot(self) -> dict[str, float]:
        """µs a step (÷ lg.SEGMENT) of each part, and the calls' total less the collector."""
        with self.lock:
            out = {k: v / lg.SEGMENT / 1000 for k, v in self.ns.items()}
            out["=gc"] = self.gc_ns / lg.SEGMENT / 1000
            out["=calls-gc"] = out.get("=calls", 0.0) - out["=gc"]
            out["#calls"] = self.count.get("=calls", 0) / lg.SEGMENT
        return out


def timed_plan(saver: Any, parts: Parts) -> None:
    """``_plan`` with a clock around each piece (the saver's code, the same order)."""

    def _plan(thread, ns, checkpoint_id, values, new_versions, fresh):  # type: ignore[no-untyped-def]
        blobs: list[StoredBlob] = []
        lines: list[LineAppend] = []
        heads: dict[str, LineHead] = {}
        now = int(time.time())
        for channel, version in new_versions.items():
            if channel not in values:
                blobs.append(StoredBlob(channel, str(version), sv._EMPTY))
                continue
            value = values[channel]
            if not isinstance(value, list):
                blobs.append(StoredBlob(channel, str(version), saver.serde.dumps_typed(value)))
                continue
            known = None if fresh else saver.heads.get(thread, ns, channel)
            t0 = clock()
            objects = tuple(value)
            t1 = clock()
            read = addresses(objects)
            t2 = clock()
            parts.add("plan.tuple(value)", t1 - t0)
            parts.add("plan.addresses", t2 - t1)
            t0 = clock()
            extended = known is not None and known.extended_by(objects, read)
            parts.add("plan.extended_by", clock() - t0)
            if extended:
                t0 = clock()
                new = list(objects[known.count :])
                ok = is_message_list(new) or not new
                parts.add("plan.new+check", clock() - t0)
                if not ok:
                    blobs.append(StoredBlob(channel, str(version), saver.serde.dumps_typed(value)))
                    continue
                key, expect = known.key, known.count
                opened = open_after(known.open_calls(), new)
            elif not is_message_list(value):
                blobs.append(StoredBlob(channel, str(version), saver.serde.dumps_typed(value)))
                continue
            else:
                base = base_key(ns, channel)
                key = base
                if fresh or saver.tables.line_count(thread, base):
                    key = branch_key(base, checkpoint_id)
                expect, new, opened = 0, objects, None
            if new:
                t0 = clock()
                rows = to_rows(new, saver.serde, now)
                parts.add("plan.to_rows", clock() - t0)
                lines.append(LineAppend(key, expect, rows))
            blobs.append(StoredBlob(channel, str(version), reference(key, len(objects))))
            t0 = clock()
            heads[channel] = LineHead(key, len(objects), objects, read, open=opened)
            parts.add("plan.LineHead", clock() - t0)
        return blobs, lines, heads

    saver._plan = _plan


def instrument(saver: Any, parts: Parts) -> None:
    """Every part of put / put_writes / get_tuple named in the brief."""
    if BARE:
        return
    timed_plan(saver, parts)
    parts.wrap(saver, "_plan", "plan(rest)")
    for name in ("put", "put_writes", "get_tuple", "_write_thread", "_put", "_readable", "_tuple", "_line"):
        parts.wrap(saver, name)
    for name in (
        "put_checkpoint",
        "put_writes",
        "get_checkpoint",
        "get_blobs",
        "get_writes",
        "line_count",
        "line_rows",
    ):
        parts.wrap(saver.tables, name, "tables." + name)
    parts.wrap(saver.serde, "dumps_typed", "serde.dumps")
    parts.wrap(saver.serde, "loads_typed", "serde.loads")
    parts.wrap(saver.memory, "session_claim", "session_claim")
    parts.wrap(saver.heads, "remember", "heads.remember(release)")
    parts.wrap(saver.heads, "get", "heads.get")
    parts.wrap(saver.durable, "stored", "durable.stored")
    parts.wrap(saver.durable, "unguarded", "durable.unguarded")
    parts.wrap(saver.durable, "read", "durable.read")
    parts.wrap(saver.refused, "check", "refused.check")
    parts.wrap(sv, "message_channels", "message_channels")
    parts.wrap(sv, "open_calls_of", "open_calls_of")


def open_saver(url: str, stack: contextlib.ExitStack) -> Any:
    """A FlowmemSaver on a fresh database of the server."""
    from flowmem.integrations.langgraph.saver import FlowmemSaver

    db = f"lg6_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    return stack.enter_context(FlowmemSaver.from_conn_string(lg.database_url(url, db)))


def invoke(graph: Any, thread: str, start: int) -> None:
    """One segment of the bench's graph; ``MODE`` its durability."""
    graph.invoke({"messages": [lg.message(start)]}, lg.config(thread), durability=MODE)


def summary(samples: dict[str, list[dict[str, float]]], out: dict[str, Any], title: str) -> None:
    """min / median per part, per kind of segment; L ÷ N and L ÷ M of the calls."""
    kinds = [k for k in ("L", "N", "M", "P") if samples.get(k)]
    names = sorted({p for k in kinds for s in samples[k] for p in s})
    print(f"\n## {title}: µs a step, min (median) over {len(samples[kinds[0]])} segments")
    print(f"{'part':28s}" + "".join(f"{k:>20s}" for k in kinds) + "   L-N min")
    table = {}
    for p in names:
        row = {}
        for k in kinds:
            vals = [s.get(p, 0.0) for s in samples[k]]
            row[k] = (min(vals), statistics.median(vals))
        table[p] = row
        print(
            f"{p:28s}"
            + "".join(f"{row[k][0]:10.2f} ({row[k][1]:7.2f})" for k in kinds)
            + f"  {row['L'][0] - row['N'][0]:+8.2f}"
        )
    calls = {k: [s["=calls-gc"] for s in samples[k]] for k in kinds}
    if BARE or not all(v > 0 for k in kinds for v in calls[k]):
        out[title] = {"samples": samples}
        return
    ratios = [a / b for a, b in zip(calls["L"], calls["N"], strict=False)]
    print(
        f"calls-gc L÷N per round: {' '.join(f'{r:.2f}' for r in ratios)}; "
        f"min÷min {min(calls['L']) / min(calls['N']):.3f}, median÷median "
        f"{statistics.median(calls['L']) / statistics.median(calls['N']):.3f}"
    )
    if "P" in calls:
        noise = [a / b for a, b in zip(calls["P"], calls["N"], strict=False)]
        print(f"calls-gc P÷N (two new threads, the noise) per round: {' '.join(f'{r:.2f}' for r in noise)}")
        out.setdefault("noise", {})[title] = noise
    if "M" in calls:
        print(
            f"calls-gc L÷M: min÷min {min(calls['L']) / min(calls['M']):.3f}, median÷median "
            f"{statistics.median(calls['L']) / statistics.median(calls['M']):.3f}"
        )
    out[title] = {"samples": samples, "table": table, "L_over_N_per_round": ratios}


def main() -> None:
    out: dict[str, Any] = {"mode": MODE, "rounds": ROUNDS, "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    print(f"LG6 parts, mode {MODE}, {ROUNDS} rounds; load {out['loadavg_start']}; {time.strftime('%H:%M:%S', time.gmtime())} UTC", flush=True)
    with pgserver.throwaway_postgres() as (url, _pid), contextlib.ExitStack() as stack:
        saver = open_saver(url, stack)
        parts = Parts()
        record: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        recording = {"on": False}
        rec_lock = threading.Lock()
        instrument(saver, parts)
        for name in ("put", "put_writes", "get_tuple"):
            inner = getattr(saver, name)

            def recorder(*a: Any, _inner: Any = inner, _name: str = name, **kw: Any) -> Any:
                if recording["on"]:
                    args = a
                    if _name == "put":
                        cfg, cp, md, nv = a
                        cp = dict(cp)
                        cp["channel_values"] = dict(cp["channel_values"])
                        args = (cfg, cp, dict(md), dict(nv))
                    with rec_lock:
                        record.append((_name, args, kw))
                return _inner(*a, **kw)

            setattr(saver, name, recorder)
        graph = lg.build_graph(saver)
        invoke(graph, "warm", 0)
        samples: dict[str, list[dict[str, float]]] = {"L": [], "N": [], "M": [], "P": []}
        recorded_threads: list[str] = []
        for r in range(ROUNDS):
            long_t, new_t = f"L{r}", f"N{r}"
            recording["on"] = r == 0
            if r == 0:
                recorded_threads[:] = [long_t, new_t]
            for start in range(0, 900, lg.SEGMENT):
                invoke(graph, long_t, start)
            order = [("L", long_t, 900), ("N", new_t, 0), ("M", new_t, 100), ("P", f"P{r}", 0)]
            if r % 2:
                order = [order[3], order[1], order[2], order[0]]  # M stays after N
            for kind, thread, start in order:
                gc.collect()
                parts.reset()
                mark(f"before graph {kind}{r}")
                invoke(graph, thread, start)
                mark(f"graph {kind}{r}")
                samples[kind].append(parts.snapshot())
            recording["on"] = False
            print(f"round {r + 1}/{ROUNDS} done, load {open('/proc/loadavg').read().split()[0]}", flush=True)
        summary(samples, out, f"graph ({MODE} durability)")

        # --- replay: the same calls without LangGraph between them ------------------------
        replay_saver = open_saver(url, stack)
        rparts = Parts()
        instrument(replay_saver, rparts)
        # timed replay, segments delimited by the invokes' first call (get_tuple)
        for passing in (False, True):
            rsamples = {"L": [], "N": [], "M": []}
            for rep in range(REPLAYS):
                suffix = f"-t{'p' if passing else 'r'}{rep}"
                stored = set()
                deferred = defaultdict(list)
                current: str | None = None
                rparts.reset()

                def close(kind: str | None, rep: int = rep, passing: bool = passing) -> None:
                    mark(f"{'replay+pass' if passing else 'replay'} {kind}{rep}")
                    if kind is not None:
                        rsamples[kind].append(rparts.snapshot())
                    rparts.reset()

                invokes: dict[str, int] = defaultdict(int)
                for name, args, kw in record:
                    cfg = args[0]
                    conf = dict(cfg["configurable"])
                    thread = conf["thread_id"]
                    conf["thread_id"] = thread + suffix
                    new_cfg = {**cfg, "configurable": conf}
                    if name == "get_tuple":  # an invoke's start: its segment by the thread's invokes
                        index = invokes[thread]
                        invokes[thread] += 1
                        kind = None
                        if thread.startswith("L") and index == 9:
                            kind = "L"
                        elif thread.startswith("N"):
                            kind = "NM"[index] if index < 2 else None
                        close(current)
                        current = kind
                    if name == "put_writes" and conf.get("checkpoint_id") not in stored:
                        deferred[conf.get("checkpoint_id")].append((args, kw, new_cfg))
                        continue
                    if passing and name == "put":
                        msgs = args[1]["channel_values"].get("messages") or []
                        if msgs:
                            add_messages(msgs[:-1], msgs[-1:])
                    getattr(replay_saver, name)(new_cfg, *args[1:], **kw)
                    if name == "put":
                        stored.add(args[1]["id"])
                        for wargs, wkw, wcfg in deferred.pop(args[1]["id"], []):
                            replay_saver.put_writes(wcfg, *wargs[1:], **wkw)
                close(current)
                print(f"replay {'+pass ' if passing else ''}{rep + 1}/{REPLAYS} done, load {open('/proc/loadavg').read().split()[0]}", flush=True)
            summary(rsamples, out, "replay+pass" if passing else "replay")
        out["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    out["marks"] = marks
    with open(OUT, "w") as f:
        json.dump(out, f)
    print(f"\nload at end {out['loadavg_end']}; {time.strftime('%H:%M:%S', time.gmtime())} UTC; JSON {OUT}")


if __name__ == "__main__":
    main()
