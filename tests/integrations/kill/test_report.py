"""The kill matrix's report (``report.py``) runs and tables a program's matrix, so it cannot rot."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations.kill.points import POINTS, TOOL_STARTED
from tests.integrations.kill.report import main, run

TOY = "tests.integrations.kill.toy_program"


def test_the_report_tables_every_point_of_a_program_and_counts_its_failures() -> None:
    """Run as its docstring says; stdout is the table alone (what programs print goes to stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.integrations.kill.report", "--rounds=1", f"--programs={TOY}"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert all(line[:1] in ("", "|", "-", "*") for line in text.splitlines()), text
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| toy_program |")
    ]
    assert [row[1] for row in rows] == list(POINTS)
    for _, point, backend, rounds, killed, question, call, answered, accepted, once, passed in rows:
        assert (backend, rounds, killed, question) == ("sqlite", "1", "1/1", "1/1")
        assert call == "1/1" if point in TOOL_STARTED else call.endswith("(n/a)")
        if point in TOOL_STARTED:
            assert answered == "1/1"
        assert (accepted, once, passed) == ("1/1", "1/1", "1/1")
    assert "no control" in text
    assert text.rstrip().endswith("**flowmem rows: 0 failed rounds of 6**")


def test_a_program_that_does_not_import_is_skipped_with_the_reason() -> None:
    out = io.StringIO()
    assert run(["tests.integrations.kill.no_such_program"], rounds=1, postgres=None, out=out) == 0
    assert (
        "`tests.integrations.kill.no_such_program` skipped: ModuleNotFoundError" in out.getvalue()
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--programs", "nope"], "unknown program(s) nope"),
        (["--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_bad_arguments_say_what_to_pass(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert says in str(exited.value) + capsys.readouterr().err
