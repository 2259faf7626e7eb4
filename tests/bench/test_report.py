"""``bench/report.py`` on small synthetic JSON: the charts, their tables, the section it rewrites."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench.smoke import bench_lib


@pytest.fixture(scope="module")
def report() -> ModuleType:
    """bench/report.py, loaded when a test here runs: it imports matplotlib, which no other module needs."""
    return bench_lib("siblings").load("report")


RUN = {
    "command": "python bench/x.py --quick",
    "date": "2026-12-02 07:00 UTC",
    "commit": "abc1234",
    "machine": "2 cores (Test CPU), 8 GiB, Linux",
    "quick": True,
    "load": "0.5 at the start (1-minute)",
}


def _write(results: Path, name: str, found: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps({"bench": name, **RUN, **found}))


STORE = {
    "appends_per_s": {
        "flowmem SqliteStore": {"100": [400.0, 420.0, 440.0], "1000": [410.0, 430.0, 450.0]},
        "LangGraph SqliteSaver": {"100": [80.0], "1000": [20.0]},
    },
    "last50_load_s": {"flowmem SqliteStore": {"100": [0.0004], "1000": [0.0004]}},
    "whole_load_s": {"flowmem SqliteStore": {"100": [0.0006], "1000": [0.003]}},
}
PEERS = {
    "appends_per_s": {
        "flowmem PostgresStore": {"100": {"samples": [900.0, 1000.0], "median": 950.0}}
    }
}
GRAPH = {
    "lengths": [100, 1000],
    "storage_at": 1000,
    "savers": {
        "FlowmemSaver (SQLite)": {
            "lengths": {
                "100": {"how": "grown", "step_s": [0.002, 0.0022], "storage_bytes": [65536]},
                "1000": {"how": "grown", "step_s": [0.0021], "storage_bytes": [524288]},
            }
        },
        "SqliteSaver": {
            "lengths": {"100": {"how": "grown", "step_s": [0.01]}},
            "storage_bytes": [2097152],
        },
    },
}


def _phase(name: str, kinds: dict[str, tuple[float, float, float]]) -> dict[str, Any]:
    return {
        "name": name,
        "kinds": {
            kind: {"per_s": rate, "latency_ms": {"0.5": p50, "0.99": p99}}
            for kind, (rate, p50, p99) in kinds.items()
        },
    }


HTTP = {
    "clients": 4,
    "duration_s": 1.0,
    "backends": [
        {
            "label": "SQLite, 1 worker",
            "phases": [
                _phase("ceiling", {"health": (2000.0, 1.0, 4.0)}),
                _phase("append", {"append": (800.0, 3.0, 12.0)}),
                _phase("mixed", {"append": (600.0, 3.0, 15.0), "read": (150.0, 2.0, 9.0)}),
            ],
        }
    ],
}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    where = tmp_path / "results"
    _write(where, "store", STORE)
    _write(where, "store-peers_postgres", PEERS)
    _write(where, "langgraph", GRAPH)
    _write(where, "http", HTTP)
    return where


def _png_size(path: Path) -> tuple[int, int]:
    import matplotlib.image  # with bench/report.py's, only when these tests run

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


def test_one_command_draws_every_chart_and_writes_its_table(
    report: ModuleType, results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    images, doc = tmp_path / "docs" / "images", tmp_path / "docs" / "performance.md"
    doc.parent.mkdir(parents=True)
    doc.write_text("# Performance\n\nmeasured by hand.\n")
    args = ["--results", str(results), "--images", str(images), "--markdown", str(doc)]
    drawn: list[Any] = []
    charts = report.charts

    def drawing(results: Path, images: Path) -> Any:
        drawn.append(charts(results, images))
        return drawn[-1]

    monkeypatch.setattr(report, "charts", drawing)
    assert report.main(args) == 0
    for name in ("bench-appends", "bench-reads", "bench-langgraph", "bench-http"):
        width, height = _png_size(images / f"{name}.png")
        assert width > 600 and height > 300
    text = doc.read_text()
    assert text.startswith("# Performance\n\nmeasured by hand.\n")  # kept as it was
    assert "![Appends per second against buffer length](images/bench-appends.png)" in text
    # the medians and ranges plotted, in their tables
    assert "| SQLite | flowmem SqliteStore | 420 (400–440) | 430 (410–450) |" in text
    assert "| PostgreSQL | flowmem PostgresStore | 950 (900–1,000) | — |" in text
    assert "| the whole buffer | flowmem SqliteStore | 0.600 | 3.00 |" in text
    assert "| ms per step | FlowmemSaver (SQLite) | 2.10 (2.00–2.20) | 2.10 |" in text
    assert "| storage MiB | FlowmemSaver (SQLite) | 0.062 | 0.500 |" in text
    assert "| storage MiB | SqliteSaver | — | 2.00 |" in text  # one size, at storage_at
    assert "| SQLite, 1 worker | ceiling | 2,000 | 1.00 | 1.00 | 4.00 |" in text
    assert "| SQLite, 1 worker | mixed | 750 | 0.38 | 3.00 | 15.0 |" in text
    assert "2026-12-02 07:00 UTC, commit abc1234, on 2 cores (Test CPU)" in text
    assert "load average 0.5 at the start (1-minute)" in text
    assert "a `--quick` smoke run" in text
    # a second run replaces its section, never adds another (its charts as the first drew
    # them: each chart is drawn once in this module, ~0.5 s of CPU a chart)
    monkeypatch.setattr(report, "charts", lambda results, images: drawn[0])
    assert report.main(args) == 0
    again = doc.read_text()
    assert again == text and again.count(report.BEGIN) == 1


def test_a_missing_json_skips_its_chart_and_none_at_all_fails(
    report: ModuleType, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (results / "http.json").unlink()
    (results / "langgraph.json").unlink()
    images = tmp_path / "images"
    assert report.main(["--results", str(results), "--images", str(images), "--no-markdown"]) == 0
    printed = capsys.readouterr().out
    assert "skipped: HTTP: no http.json" in printed
    assert "skipped: LangGraph: no langgraph.json" in printed
    assert not (images / "bench-http.png").exists()
    assert not (images / "bench-langgraph.png").exists()
    assert (images / "bench-appends.png").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report.main(["--results", str(empty), "--images", str(images), "--no-markdown"]) == 1


def test_without_peers_on_postgresql_the_appends_chart_has_sqlite_only(
    report: ModuleType, results: Path, tmp_path: Path
) -> None:
    for name in ("store-peers_postgres", "langgraph", "http"):  # the store's two charts alone
        (results / f"{name}.json").unlink()
    made, _ = report.charts(results, tmp_path / "images")
    appends = next(chart for chart in made if chart.name == "bench-appends")
    assert {row[0] for row in appends.rows} == {"SQLite"}
    assert len(appends.sources) == 1
