"""tests/bench/forked.py: a script forked from the bench fork server runs as ``python SCRIPT`` runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bench import forked

PROBE = """
import atexit, gc, json, os, sys, threading, time
atexit.register(lambda: print("atexit ran", flush=True))
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
    "file": __file__, "preloaded": "fractions" in sys.modules, "parent": os.getppid(),
    "test": os.environ.get("PYTEST_CURRENT_TEST"), "frozen": gc.get_freeze_count() > 0,
    "collecting": gc.isenabled(),
}), flush=True)
def late():
    time.sleep(0.2)
    print("thread joined", flush=True)
threading.Thread(target=late).start()
how = sys.argv[1]
if how == "code":
    sys.exit(3)
if how == "message":
    sys.exit("refused")
if how == "raise":
    raise ValueError("boom")
if how == "sleep":
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def server() -> Iterator[forked.BenchServer]:
    """A server of this module's own (the session's is left as it is)."""
    running = forked.BenchServer()
    yield running
    running.close()


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    script = tmp_path / "scripts" / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    return script


def _printed(done: subprocess.CompletedProcess[str]) -> tuple[dict[str, object], list[str]]:
    first, *rest = done.stdout.splitlines()
    found = json.loads(first)
    found.pop("parent")
    found.pop("test")
    found.pop("preloaded")
    found.pop("frozen")
    return found, rest


@pytest.mark.parametrize("how", ["ok", "code", "message", "raise"])
def test_a_forked_run_prints_and_exits_as_the_plain_run(
    server: forked.BenchServer, probe: Path, how: str
) -> None:
    plain = subprocess.run(
        [sys.executable, str(probe), how, "--flag"], capture_output=True, text=True, timeout=60
    )
    fork = server.run(probe, [how, "--flag"], (), timeout=60)

    assert fork.returncode == plain.returncode == {"ok": 0, "code": 3}.get(how, 1)
    assert _printed(fork) == _printed(plain)
    found, rest = _printed(fork)
    assert found["argv"] == [str(probe), how, "--flag"] and found["name"] == "__main__"
    assert found["path0"] == str(probe.parent) and found["cwd"] == os.getcwd()
    assert rest == ["thread joined", "atexit ran"]  # threads joined first, then atexit, as at exit
    if how == "raise":
        assert fork.stderr.startswith("Traceback") and plain.stderr.startswith("Traceback")
        assert fork.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1] == "ValueError: boom"
    else:
        assert fork.stderr == plain.stderr == ("refused\n" if how == "message" else "")


def test_the_preloads_are_imported_by_the_server_and_frozen(
    server: forked.BenchServer, probe: Path
) -> None:
    alone = server.run(probe, ["ok"], (), timeout=60)
    assert json.loads(alone.stdout.splitlines()[0])["preloaded"] is False
    loaded = server.run(probe, ["ok"], ("fractions", "no_such_module_here"), timeout=60)
    found = json.loads(loaded.stdout.splitlines()[0])
    assert found["preloaded"] is True and found["parent"] == server.process.pid
    assert found["frozen"] is True  # the preloads kept out of the child's collections
    assert found["collecting"] is True  # the collector on again after the imports
    assert loaded.returncode == 0
    plain = subprocess.run(
        [sys.executable, str(probe), "ok"], capture_output=True, text=True, timeout=60
    )
    assert json.loads(plain.stdout.splitlines()[0])["preloaded"] is False


def test_a_child_takes_the_tests_environment_and_a_changed_one_runs_plain(
    server: forked.BenchServer, probe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "this one")  # pytest's per-test variable: served
    assert server.serves(os.environ)
    found = json.loads(server.run(probe, ["ok"], (), timeout=60).stdout.splitlines()[0])
    assert found["test"] == "this one"
    done = forked.run_script(probe, ["ok"])  # the session's server: a child of it
    assert json.loads(done.stdout.splitlines()[0])["parent"] != os.getpid()
    monkeypatch.setenv("FLOWMEM_TEST_FORK_PROBE", "1")  # anything else: a plain process
    assert not server.serves(os.environ)
    done = forked.run_script(probe, ["ok"])
    assert json.loads(done.stdout.splitlines()[0])["parent"] == os.getpid()
    monkeypatch.delenv("FLOWMEM_TEST_FORK_PROBE")
    monkeypatch.setenv(forked.SWITCH, "0")
    done = forked.run_script(probe, ["ok"])
    assert json.loads(done.stdout.splitlines()[0])["parent"] == os.getpid()


def test_a_child_past_its_timeout_is_killed_and_the_server_goes_on(
    server: forked.BenchServer, probe: Path
) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(probe, ["sleep"], (), timeout=1)
    assert server.run(probe, ["code"], (), timeout=60).returncode == 3
