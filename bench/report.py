"""Charts of the benches' JSON, and the tables they come from, for docs/performance.md.

    python bench/report.py              # bench/results/*.json -> docs/images/bench-*.png
    python bench/report.py --results DIR --images DIR --markdown FILE

Reads what the benches wrote beside their tables (``bench/lib/report_json.py``):

- ``store.json`` (``bench/store.py``) and ``store-peers_postgres.json`` or
  ``peers_postgres.json`` (``bench/peers_postgres.py``): appends/s against buffer
  length for flowmem and each peer measured in the same run
  (``bench-appends.png``), and the read latency against length
  (``bench-reads.png``);
- ``langgraph.json`` (``bench/langgraph.py``): a super-step's time and the storage
  against the thread's length, per checkpointer (``bench-langgraph.png``);
- ``http.json`` (``bench/http.py``): requests/s and p99 latency of each phase beside
  the empty endpoint's ceiling, per backend (``bench-http.png``).

Each point is the median of the run's repeats, with a band (or a bar) from the
lowest to the highest. A JSON that is missing is reported and its chart skipped.
The section between the ``<!-- bench/report.py -->`` markers of the Markdown file is
replaced by the charts, each with its table, its command, machine, date and commit
(a ``--quick`` run is labelled as one). Drawn with matplotlib's Agg backend: no
display needed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- bench/report.py: begin (generated: edit bench/report.py, not this section) -->"
END = "<!-- bench/report.py: end -->"
MIB = 1024 * 1024


@dataclass
class Chart:
    """One PNG and the table it was drawn from, with the run it comes from."""

    name: str
    title: str
    caption: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)


def load(results: Path, *names: str) -> dict[str, Any] | None:
    """The first of ``names`` (``<name>.json`` in ``results``) that exists, parsed; else None."""
    for name in names:
        path = results / f"{name}.json"
        if path.is_file():
            found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            where = path.resolve()
            shown = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
            found.setdefault("_file", shown.as_posix())
            return found
    return None


def samples(value: Any) -> list[float]:
    """The samples of a cell: a list, one number, or ``{"samples": [...]}``."""
    if isinstance(value, dict):
        value = value.get("samples", [])
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(v) for v in value or [] if isinstance(v, (int, float))]


def spread(values: list[float], scale: float = 1.0) -> tuple[float, float, float]:
    """(median, min, max) of ``values`` times ``scale``."""
    return (
        statistics.median(values) * scale,
        min(values) * scale,
        max(values) * scale,
    )


def number(value: float) -> str:
    """A figure as the tables write it: no more digits than it is worth."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell(values: list[float], scale: float = 1.0) -> str:
    """``median (min–max)``, or the one value."""
    if not values:
        return "—"
    mid, low, high = spread(values, scale)
    if len(values) == 1:
        return number(mid)
    return f"{number(mid)} ({number(low)}–{number(high)})"


def series(table: dict[str, Any]) -> dict[str, dict[int, list[float]]]:
    """``{system: {length: cell}}`` of a JSON as ``{system: {length: samples}}``, lengths sorted."""
    out: dict[str, dict[int, list[float]]] = {}
    for system, by_length in table.items():
        points = {int(n): samples(v) for n, v in by_length.items()}
        out[system] = {n: points[n] for n in sorted(points) if points[n]}
    return out


def plot_lines(
    axes: Any, found: dict[str, dict[int, list[float]]], scale: float = 1.0
) -> None:
    """One line per system: the median, and a band from the lowest to the highest sample."""
    for system, points in found.items():
        if not points:
            continue
        xs = list(points)
        mids, lows, highs = zip(*(spread(points[x], scale) for x in xs), strict=True)
        (line,) = axes.plot(xs, mids, marker="o", label=system)
        axes.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.15)
    axes.set_xscale("log")
    axes.set_yscale("log")
    measured = sorted({x for points in found.values() for x in points})
    axes.set_xticks(measured, [f"{x:,}" for x in measured])  # the lengths measured, as numbers
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.grid(True, which="both", alpha=0.3)


def panel(axis: Any, found: dict[str, dict[int, list[float]]], title: str, labels: tuple[str, str], scale: float = 1.0) -> None:
    """One chart of lines (``plot_lines``) with its title, axis ``labels`` (x, y) and legend."""
    plot_lines(axis, found, scale)
    axis.set_title(title)
    axis.set_xlabel(labels[0])
    axis.set_ylabel(labels[1])
    axis.legend(fontsize=7)


def table_rows(
    first: str, found: dict[str, dict[int, list[float]]], lengths: list[int], scale: float = 1.0
) -> list[list[str]]:
    """The table rows of ``found``: ``first``, the system, a cell per length ("—": not measured)."""
    return [
        [first, system, *[cell(points.get(n, []), scale) for n in lengths]]
        for system, points in found.items()
    ]


def lengths_of(*tables: dict[str, dict[int, list[float]]]) -> list[int]:
    """Every length any system of ``tables`` was measured at, sorted."""
    return sorted({n for table in tables for points in table.values() for n in points})


def source(found: dict[str, Any]) -> dict[str, Any]:
    """What a chart's caption says of the run its numbers come from."""
    keys = ("_file", "command", "date", "machine", "commit", "quick", "load")
    return {key: found.get(key) for key in keys}


def save(figure: Any, images: Path, chart: Chart) -> Path:
    """Write the figure as ``images/<name>.png``, stamped with its runs, and close it."""
    images.mkdir(parents=True, exist_ok=True)
    path = images / f"{chart.name}.png"
    stamp = "; ".join(
        f"{Path(run['_file']).name}, {run['date']}, commit {run['commit']}"
        + (" (--quick: a smoke run)" if run.get("quick") else "")
        for run in chart.sources
    )
    figure.text(0.995, 0.005, stamp, ha="right", va="bottom", fontsize=7, color="gray")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def appends_chart(store: dict[str, Any], peers: dict[str, Any] | None, images: Path) -> Chart:
    """Appends/s against buffer length: the SQLite systems and, when run, the PostgreSQL ones."""
    groups = [("SQLite (bench/store.py)", series(store.get("appends_per_s", {})), store)]
    if peers is not None and peers.get("appends_per_s"):
        groups.append(("PostgreSQL (bench/peers_postgres.py)", series(peers["appends_per_s"]), peers))
    figure, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.6), squeeze=False)
    lengths = lengths_of(*(found for _, found, _ in groups))
    chart = Chart(
        "bench-appends",
        "Appends per second against buffer length",
        "One message per append, at each system's default durability; the median of "
        "the repeats, the band from the lowest to the highest.",
        ["backend", "system", *[f"{n:,} rows" for n in lengths]],
    )
    for axis, (label, found, run) in zip(axes[0], groups, strict=True):
        panel(axis, found, label, ("messages in the buffer", "appends / s"))
        chart.rows += table_rows(label.split(" ")[0], found, lengths)
        chart.sources.append(source(run))
    save(figure, images, chart)
    return chart


def reads_chart(store: dict[str, Any], images: Path) -> Chart:
    """Read latency (ms) against buffer length: the last 50 messages, and the whole buffer."""
    reads = [
        ("the last 50 messages", series(store.get("last50_load_s", {}))),
        ("the whole buffer", series(store.get("whole_load_s", {}))),
    ]
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.6), squeeze=False)
    lengths = lengths_of(*(found for _, found in reads))
    chart = Chart(
        "bench-reads",
        "Read latency against buffer length",
        "Milliseconds per read (bench/store.py, best of several reads per repeat); the "
        "median of the repeats, the band from the lowest to the highest.",
        ["read", "system", *[f"{n:,} rows" for n in lengths]],
        sources=[source(store)],
    )
    for axis, (label, found) in zip(axes[0], reads, strict=True):
        panel(axis, found, f"reading {label}", ("messages in the buffer", "ms"), 1000.0)
        chart.rows += table_rows(label, found, lengths, 1000.0)
    save(figure, images, chart)
    return chart


def langgraph_chart(graph: dict[str, Any], images: Path) -> Chart:
    """A super-step's time and the storage against the thread's length, per checkpointer."""
    steps: dict[str, dict[int, list[float]]] = {}
    sizes: dict[str, dict[int, list[float]]] = {}
    for saver, entry in graph.get("savers", {}).items():
        for n, measured in entry.get("lengths", {}).items():
            if samples(measured.get("step_s")):
                steps.setdefault(saver, {})[int(n)] = samples(measured["step_s"])
            if samples(measured.get("storage_bytes")):
                sizes.setdefault(saver, {})[int(n)] = samples(measured["storage_bytes"])
        if saver not in sizes and entry.get("storage_bytes"):  # a JSON from before per-length sizes
            sizes[saver] = {int(graph.get("storage_at", 0)): samples(entry["storage_bytes"])}
    steps = {k: dict(sorted(v.items())) for k, v in steps.items()}
    sizes = {k: dict(sorted(v.items())) for k, v in sizes.items()}
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.6), squeeze=False)
    thread = "messages in the thread"
    step_title = "time per super-step (one message, one checkpoint)"
    panel(axes[0][0], steps, step_title, (thread, "ms per step"), 1000.0)
    panel(axes[0][1], sizes, "storage of the thread", (thread, "MiB"), 1 / MIB)
    lengths = lengths_of(steps, sizes)
    chart = Chart(
        "bench-langgraph",
        "LangGraph checkpointers: step time and storage against thread length",
        "bench/langgraph.py: a StateGraph(MessagesState) loop, one message per step; the "
        "step time is a 100-step segment's ÷ 100 (ms), the storage the database's size "
        "(MiB) when the thread reached that length.",
        ["measure", "saver", *[f"{n:,}" for n in lengths]],
        sources=[source(graph)],
    )
    chart.rows += table_rows("ms per step", steps, lengths, 1000.0)
    chart.rows += table_rows("storage MiB", sizes, lengths, 1 / MIB)
    save(figure, images, chart)
    return chart


def _phase_totals(phase: dict[str, Any]) -> tuple[float, float, float]:
    """A phase's requests/s (all kinds) and its p50 and p99 latency (ms, the slowest kind's)."""
    kinds = phase.get("kinds", {}).values()
    rate = sum(float(k.get("per_s", 0.0)) for k in kinds)
    p50 = max((float(k["latency_ms"].get("0.5", 0.0)) for k in kinds), default=0.0)
    p99 = max((float(k["latency_ms"].get("0.99", 0.0)) for k in kinds), default=0.0)
    return rate, p50, p99


def http_chart(http: dict[str, Any], images: Path) -> Chart:
    """Requests/s and p99 of each phase beside the empty endpoint's ceiling, per backend."""
    backends = http.get("backends", [])
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.6), squeeze=False)
    chart = Chart(
        "bench-http",
        "HTTP throughput and p99 against the empty-endpoint ceiling",
        f"bench/http.py: {http.get('clients', '?')} keep-alive clients, "
        f"{http.get('duration_s', '?')} s per phase; the ceiling is GET /health of the "
        "same server.",
        ["backend", "phase", "requests/s", "÷ ceiling", "p50 ms", "p99 ms"],
        sources=[source(http)],
    )
    width = 0.8 / max(1, len(backends))
    phases: list[str] = []
    for backend in backends:
        for phase in backend.get("phases", []):
            if phase["name"] not in phases:
                phases.append(phase["name"])
    for index, backend in enumerate(backends):
        found = {p["name"]: _phase_totals(p) for p in backend.get("phases", [])}
        ceiling = found.get(phases[0], (0.0, 0.0, 0.0))[0] if phases else 0.0
        xs = [i + index * width for i in range(len(phases))]
        rates = [found.get(name, (0.0, 0.0, 0.0))[0] for name in phases]
        p99s = [found.get(name, (0.0, 0.0, 0.0))[2] for name in phases]
        bars = axes[0][0].bar(xs, rates, width, label=backend["label"])
        shares = [f"{rate / ceiling:.2f}×" if ceiling else "" for rate in rates]
        axes[0][0].bar_label(bars, shares, fontsize=7)  # each phase ÷ the ceiling
        axes[0][1].bar(xs, p99s, width, label=backend["label"])
        for name in phases:
            if name not in found:
                continue
            rate, p50, p99 = found[name]
            share = f"{rate / ceiling:.2f}" if ceiling else "—"
            chart.rows.append(
                [backend["label"], name, number(rate), share, number(p50), number(p99)]
            )
    middle = [i + width * (len(backends) - 1) / 2 for i in range(len(phases))]
    titles = ("throughput (÷ the ceiling on each bar)", "p99 latency")
    for axis, title, unit in zip(axes[0], titles, ("requests / s", "ms"), strict=True):
        axis.set_xticks(middle, phases)
        axis.set_title(title)
        axis.set_ylabel(unit)
        axis.grid(True, axis="y", alpha=0.3)
        axis.legend(fontsize=7)
    save(figure, images, chart)
    return chart


def charts(results: Path, images: Path) -> tuple[list[Chart], list[str]]:
    """Every chart whose JSON is there; and a line for each one skipped."""
    made: list[Chart] = []
    skipped: list[str] = []
    store = load(results, "store")
    peers = load(results, "store-peers_postgres", "peers_postgres")
    if peers is None and store is not None and store.get("postgres_peers"):
        peers = {**store["postgres_peers"], "_file": f"{store['_file']} (postgres_peers)"}
    if store is not None:
        made.append(appends_chart(store, peers, images))
        made.append(reads_chart(store, images))
    else:
        skipped.append("appends and reads: no store.json (python bench/store.py)")
    graph = load(results, "langgraph")
    if graph is not None:
        made.append(langgraph_chart(graph, images))
    else:
        skipped.append("LangGraph: no langgraph.json (python bench/langgraph.py)")
    http = load(results, "http")
    if http is not None:
        made.append(http_chart(http, images))
    else:
        skipped.append("HTTP: no http.json (python bench/http.py)")
    return made, skipped


def markdown(made: Iterable[Chart], images_from_doc: str) -> str:
    """The generated section: per chart its image, its run and its table."""
    lines = [BEGIN, ""]
    for chart in made:
        lines += [f"### {chart.title}", "", f"![{chart.title}]({images_from_doc}/{chart.name}.png)", ""]
        lines += [chart.caption, ""]
        for run in chart.sources:
            quick = " — a `--quick` smoke run: too small to judge" if run.get("quick") else ""
            load = f", load average {run['load']}" if run.get("load") else ""
            lines.append(
                f"From `{run['_file']}` (`{run['command']}`), {run['date']}, "
                f"commit {run['commit']}, on {run['machine']}{load}{quick}."
            )
        lines += ["", "| " + " | ".join(chart.header) + " |"]
        lines.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(chart.header))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in chart.rows]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the generated section of ``path`` (or add it, under a heading, at the end)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n## Plots\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Draw every chart there is JSON for; write the section; 1 when there was none at all."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--images", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "performance.md")
    parser.add_argument("--no-markdown", action="store_true", help="draw the charts only")
    args = parser.parse_args(argv)
    made, skipped = charts(args.results, args.images)
    for line in skipped:
        print(f"skipped: {line}")
    for chart in made:
        print(f"{args.images / chart.name}.png: {chart.title}")
    if not made:
        print(f"no bench JSON in {args.results}: run the benches first", file=sys.stderr)
        return 1
    if not args.no_markdown:
        relative = os.path.relpath(args.images.resolve(), args.markdown.resolve().parent)
        write_section(args.markdown, markdown(made, Path(relative).as_posix()))
        print(f"{args.markdown}: the section between the bench/report.py markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
