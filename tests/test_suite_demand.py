"""scripts/suite_demand.py counts a command's runnable threads: busy children count, sleeping ones do not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "suite_demand.py"
BUSY_THEN_IDLE = """
import multiprocessing, time

def spin():
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass

if __name__ == "__main__":
    busy = [multiprocessing.Process(target=spin) for _ in range(2)]
    for p in busy:
        p.start()
    for p in busy:
        p.join()
    time.sleep(1.5)
"""


def test_two_busy_children_count_two_and_a_sleeping_command_leaves_the_cores_idle(tmp_path: Path) -> None:
    child = tmp_path / "busy.py"
    child.write_text(BUSY_THEN_IDLE)
    out = tmp_path / "demand.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--period", "0.1", "--", sys.executable, str(child)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    histogram = {int(k): n for k, n in found["histogram"].items()}
    assert sum(histogram.values()) == found["samples"] == len(found["series"])
    # the two spinning grandchildren want a core each (3 when the parent is seen between sleeps)
    assert sum(n for k, n in histogram.items() if k >= 2) >= 3
    assert histogram.get(0, 0) >= 5  # the command's sleep: nothing runnable
    assert found["idle_core_s"]["2"] >= 0.5 * 2  # at least half the 1.5 s sleep on both cores
    assert found["idle_core_s"]["3"] > found["idle_core_s"]["2"]
    assert "idle core-seconds on 2 cores" in done.stderr


def test_the_command_s_exit_status_is_the_script_s(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "d.json"), "--", sys.executable, "-c", "raise SystemExit(3)"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert json.loads((tmp_path / "d.json").read_text())["exit"] == 3
