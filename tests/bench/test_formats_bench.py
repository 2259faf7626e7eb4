"""Smoke test of ``bench/formats.py --quick``: it runs and writes its JSON beside the table.

No timing is asserted (timed tests flake on a shared machine); a full run judges the
targets, ``--quick`` never fails on them.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_common, run_bench


def test_quick_run_times_every_format_its_plain_oracle_and_each_peer(tmp_path: Path) -> None:
    found, printed = run_bench("formats", tmp_path / "formats.json")

    assert_common(found, "formats", printed)
    assert found["durability"] == {} and found["all_durable"] is None
    assert "durability: no database" in printed
    for fmt in ("openai", "anthropic", "responses", "gemini"):
        for name in (f"to_{fmt} stored", f"to_{fmt} flat", f"to_{fmt} plain stored", f"peer {fmt}"):
            assert found["best_s"][name][0] > 0, name
        assert found["ratios"][f"to_{fmt} stored"]["core"][0] > 0
    labels = [t["label"] for t in found["targets"]]
    assert any(label.startswith("to_responses ÷ its peer") for label in labels), labels
