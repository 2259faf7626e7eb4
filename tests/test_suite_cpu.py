"""tests/suite_cpu.py notes each test's own CPU and its reaped children's, and reports them per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.suite_cpu import DESCENDANTS, ENV, report

ROOT = Path(__file__).resolve().parents[1]
# the inner pytest loads the plugin under test (and tests/conftest.py's server fixture) and no
# installed plugin: their imports cost ~1.2 s of CPU a run and are no part of what is checked
ALONE = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
SAMPLE = """
import subprocess, sys, time

def test_spins_itself():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass

def test_a_child_spins():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"], check=True)
"""


def test_each_test_s_own_and_children_s_cpu_is_noted_and_reported(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    prefix = tmp_path / "cpu"
    outer = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", ENV))
    }  # an xdist worker's
    env = {**outer, ENV: str(prefix), "PYTHONPATH": str(ROOT), **ALONE}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.suite_cpu", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-p", "no:randomly", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads((tmp_path / "cpu.main.json").read_text())
    rows = {row[0].split("::")[1]: row for row in found["rows"]}
    assert rows["test_spins_itself"][1] >= 0.25 and rows["test_spins_itself"][2] < 0.1
    assert rows["test_a_child_spins"][2] >= 0.25
    assert rows["test_spins_itself"][4] < rows["test_a_child_spins"][4]  # when each started
    assert (
        rows["test_a_child_spins"][4] - rows["test_spins_itself"][4] >= rows["test_spins_itself"][3]
    )
    assert sum(found["collected"]) >= sum(found["start"])
    text = report(str(prefix))
    assert "2 tests" in text and "test_sample.py" in text


SERVED = """
import subprocess, sys

SERVER = "import os, sys, time\\nfor line in sys.stdin:\\n    pid = os.fork()\\n    if pid == 0:\\n        end = time.process_time() + 0.3\\n        while time.process_time() < end: pass\\n        os._exit(0)\\n    os.waitpid(pid, 0)\\n    print('done', flush=True)\\n"
server = []

def test_a_server_s_child_spins():
    server.append(subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    server[0].stdin.write("go\\n")
    server[0].stdin.flush()
    assert server[0].stdout.readline() == "done\\n"

def test_the_server_is_stopped():
    server[0].stdin.close()
    server[0].wait()
"""


def test_a_forked_child_s_cpu_counts_in_the_test_it_ran_in_not_where_its_server_is_reaped(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_served.py").write_text(SERVED)
    prefix = tmp_path / "cpu"
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", ENV))}
    env = {**outer, ENV: str(prefix), DESCENDANTS: "1", "PYTHONPATH": str(ROOT), **ALONE}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.suite_cpu", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-p", "no:randomly", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        row[0].split("::")[1]: row
        for row in json.loads((tmp_path / "cpu.main.json").read_text())["rows"]
    }
    spun, stopped = rows["test_a_server_s_child_spins"], rows["test_the_server_is_stopped"]
    assert spun[2] < 0.1 and spun[5] >= 0.25  # not reaped by the test process, yet spent in it
    assert stopped[2] >= 0.25 and stopped[5] < 0.1  # reaped here, but spent before
    text = report(str(prefix))
    assert "descendants" in text and "test_served.py" in text


def test_a_throwaway_postgres_server_s_cpu_is_noted_and_reported(tmp_path: Path) -> None:
    prefix = tmp_path / "cpu"
    (tmp_path / "cpu.gw0.json").write_text(
        json.dumps(
            {
                "rows": [],
                "start": [0, 0],
                "collected": [0, 0],
                "end": [1, 0],
                "postgres": {"a": 2.5},
            }
        )
    )
    (tmp_path / "cpu.gw1.json").write_text(
        json.dumps(
            {
                "rows": [],
                "start": [0, 0],
                "collected": [0, 0],
                "end": [1, 0],
                "postgres": {"b": 1.0},
            }
        )
    )
    assert "PostgreSQL's throwaway servers 3.5 s" in report(str(prefix))


def test_the_postgres_fixture_notes_its_server_s_cpu_when_the_plugin_is_loaded(
    tmp_path: Path,
) -> None:
    sample = "def test_uses_the_server(postgres_url):\n    import psycopg\n    psycopg.connect(postgres_url).close()\n"
    (tmp_path / "test_pg_sample.py").write_text(sample)
    (tmp_path / "conftest.py").write_text("from tests.conftest import postgres_url  # noqa: F401\n")
    prefix = tmp_path / "cpu"
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", ENV))}
    env = {**outer, ENV: str(prefix), "PYTHONPATH": str(ROOT), "CI": "1", **ALONE}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.suite_cpu", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-p", "no:randomly", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    noted = json.loads((tmp_path / "cpu.main.json").read_text())["postgres"]
    assert len(noted) == 1 and 0 < next(iter(noted.values())) < 60


def test_each_worker_s_last_end_is_reported_and_another_tool_s_json_skipped(tmp_path: Path) -> None:
    prefix = tmp_path / "cpu"
    gw0 = [
        ["tests/a.py::t1", 1, 0, 4.0, 100.0],
        ["tests/a.py::t2", 1, 0, 0.5, 104.0],
        ["tests/b.py::t", 1, 0, 0.2, 105.0],
    ]
    gw1 = [["tests/c.py::t", 1, 0, 12.0, 100.5], ["tests/b.py::u", 1, 0, 1.5, 112.5]]
    for worker, rows in (("gw0", gw0), ("gw1", gw1)):
        (tmp_path / f"cpu.{worker}.json").write_text(
            json.dumps(
                {"rows": rows, "start": [0, 0], "collected": [0, 0], "end": [1, 0], "postgres": {}}
            )
        )
    (tmp_path / "cpu.demand.json").write_text(json.dumps({"series": [[0.2, 3]], "wall_s": 14}))
    text = report(str(prefix))
    assert "5 tests" in text
    assert "the tests ran 14.0 s" in text
    assert "gw0: 8.8 s before" in text and "gw1: 0.0 s before" in text
