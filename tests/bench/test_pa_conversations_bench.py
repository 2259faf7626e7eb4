"""Smoke test of ``bench/pa_conversations.py --quick``: each system's turns and loads, the ratios, the JSON."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.bench.smoke import BENCH, run_bench

pytest.importorskip("pydantic_ai.conversation_store")


def test_quick_run_times_each_system_s_turns_and_writes_the_ratios(tmp_path: Path) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json")
    assert found["bench"] == "pa_conversations" and found["quick"] is True
    assert found["durability"]["flowmem"]["durable"] is True
    assert found["durability"]["json_sqlite_row"]["synchronous"] == "FULL"
    (length,) = found["lengths"].values()
    assert len(length["runs"]) == 2
    for run in length["runs"]:
        assert set(run) == {"flowmem", "json_file", "json_sqlite_row"}
        assert all(run[name]["turn"] > 0 and run[name]["load"] > 0 for name in run)
    for samples in length["samples"]:  # --quick's 2 conversations × 3 turns, every system
        assert {name: len(kinds["turn"]) for name, kinds in samples.items()} == dict.fromkeys(
            ("flowmem", "json_file", "json_sqlite_row"), 2 * 3
        )
    for ratio in length["ratios"].values():
        assert len(ratio["per_run"]) == 2 and ratio["min"] <= ratio["median"] <= ratio["max"]
    assert "turn_vs_json_file" in printed


def test_quick_run_keeps_every_turn_of_its_conversations_interleaved(tmp_path: Path) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json", "--conversations", "3")
    (length,) = found["lengths"].values()
    assert len(length["samples"]) == len(length["runs"]) == 2
    for medians, samples in zip(length["runs"], length["samples"], strict=True):
        assert set(samples) == {"flowmem", "json_file", "json_sqlite_row"}
        for name, kinds in samples.items():
            for kind in ("turn", "load", "turn_cpu", "load_cpu"):  # 3 conversations × 3 turns
                assert len(kinds[kind]) == 3 * 3
                assert medians[name][kind] == statistics.median(kinds[kind])
    assert "3 conversations × 3 turns" in printed


def test_one_run_turns_each_conversation_on_every_system_the_order_rotated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = _bench_module()
    taken: list[tuple[str, str, str]] = []
    load_of, turn_of = bench._load_of, bench._turn_of

    def loading(system: Any, cid: str) -> Any:
        taken.append(("load", system.name, cid))
        return load_of(system, cid)

    def turning(system: Any, added: Any, cid: str) -> Any:
        taken.append(("turn", system.name, cid))
        return turn_of(system, added, cid)

    monkeypatch.setattr(bench, "_load_of", loading)
    monkeypatch.setattr(bench, "_turn_of", turning)
    samples: dict[str, dict[str, list[float]]] = {}
    medians = asyncio.run(bench.one_run(20, 2, 1, bench.SYSTEMS, 3, samples))
    names = [cls.name for cls in bench.SYSTEMS]
    cids = [f"{bench.CID}-{k}" for k in range(3)]
    turns = [(name, cid) for kind, name, cid in taken if kind == "turn"]
    loads = [(name, cid) for kind, name, cid in taken if kind == "load"]
    assert turns == loads and len(turns) == 2 * 3 * 3
    slots = [turns[i : i + 3] for i in range(0, len(turns), 3)]
    for i, slot in enumerate(slots):  # step by step, each conversation once, every system on it
        assert {cid for _, cid in slot} == {cids[i % 3]}
        shift = (i + 1) % 3  # rotated at every conversation's turn, from the run's number
        assert [name for name, _ in slot] == names[shift:] + names[:shift]
    for name in names:
        assert len(samples[name]["turn"]) == 2 * 3
        assert medians[name]["turn"] == statistics.median(samples[name]["turn"])


def test_pickled_runs_flowmem_with_its_copies_pickled_beside_and_reports_the_plans_gain(
    tmp_path: Path,
) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json", "--pickled")
    assert found["durability"]["flowmem_pickled"]["durable"] is True
    (length,) = found["lengths"].values()
    for run in length["runs"]:
        assert set(run) == {"flowmem", "json_file", "json_sqlite_row", "flowmem_pickled"}
        assert run["flowmem_pickled"]["turn"] > 0 and run["flowmem_pickled"]["load"] > 0
    assert {"turn_cpu_pickled_vs_flowmem", "load_cpu_pickled_vs_flowmem"} <= set(length["ratios"])
    assert "load_cpu_pickled_vs_flowmem" in printed


def test_one_connection_runs_flowmem_lending_one_connection_beside(tmp_path: Path) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json", "--one-connection")
    (length,) = found["lengths"].values()
    for run in length["runs"]:
        assert set(run) == {"flowmem", "json_file", "json_sqlite_row", "flowmem_one_connection"}
    assert {"turn_one_connection_vs_flowmem", "turn_cpu_one_connection_vs_flowmem"} <= set(
        length["ratios"]
    )
    assert not any("one_connection" in target["label"] for target in found["targets"])
    assert "turn_one_connection_vs_flowmem" in printed


def test_parts_times_flowmem_alone_part_by_part(tmp_path: Path) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json", "--parts")
    (parts,) = found["parts"].values()
    named = ("loaded", "queued", "worker_start", "commit_start", "worker_end", "end")
    for name in (*named, "turn", "turn_cpu", "worker_cpu"):
        assert 0 < parts[name]["min"] <= parts[name]["median"] <= parts[name]["max"]
    assert sum(parts[name]["min"] for name in named) <= parts["turn"]["max"]
    assert parts["caller_statements"]["median"] >= 1 and parts["worker_statements"]["median"] >= 3
    assert "COMMIT" in printed


def _bench_module() -> Any:
    """bench/pa_conversations.py, loaded by path (its own sys.path setup finds bench/lib)."""
    spec = importlib.util.spec_from_file_location("bench_pa_conversations", BENCH / "pa_conversations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_srcs_runs_each_code_in_its_own_process_the_order_alternating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench_module()
    ran: list[tuple[str, str]] = []
    real_run = bench.subprocess.run

    def child(command: list[str], env: dict[str, str] | None = None, **kwargs: Any) -> Any:
        if "--json" not in command:  # not a child bench (the commit's lookup)
            return real_run(command, **kwargs)
        assert env is not None
        out = Path(command[command.index("--json") + 1])
        ran.append((env["PYTHONPATH"], out.name))
        ratio = len(ran) / 10  # each child's own figures, to find them in the table
        spread = {"per_run": [ratio], "min": ratio, "median": ratio, "max": ratio}
        found = {"durability": {"flowmem": {"backend": "sqlite", "durable": True}},
                 "lengths": {"20": {"ratios": {label: spread for label in bench.RATIOS}}}}
        out.write_text(json.dumps(found))

    monkeypatch.setattr(bench.subprocess, "run", child)
    out = tmp_path / "srcs.json"
    argv = ["--srcs", "old=/tmp/old,new=/tmp/new", "--rounds", "3", "--quick", "--json", str(out)]
    assert bench.main(argv) == 0
    assert [src for src, _ in ran] == ["/tmp/old", "/tmp/new", "/tmp/new", "/tmp/old", "/tmp/old", "/tmp/new"]
    found = json.loads(out.read_text())
    assert [r["lengths"]["20"]["ratios"]["turn_vs_json_file"]["min"] for r in found["codes"]["new"]["rounds"]] == [
        0.2, 0.3, 0.6
    ]
    assert found["codes"]["old"]["src"] == "/tmp/old"
    printed = capsys.readouterr().out
    assert "old 0.10/0.10/0.10; 0.40/0.40/0.40; 0.50/0.50/0.50" in printed
