"""The packaging check's scenarios are docs/guide.md's table of extras, and its wheel checks bite.

The check itself (``python -m tests.packaging``, ``make packaging``) installs and runs;
these tests, in the suite, only read: the guide, pyproject.toml, the scenarios, and
wheels made here.
"""

from __future__ import annotations

import re
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.packaging.scenarios import SCENARIOS, common
from tests.packaging.serving import Serve
from tests.packaging.wheel import problems

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `pip install '<checkout>(?:\[(?P<extra>[\w-]+)\])?'` \| (?P<gives>.*) \|$", re.M)
NOT_NAMES = {"GET", "pip", "install", "extra", "includes"}


def _rows() -> dict[str, str]:
    """The guide's table of extras: extra ('' for the base install) -> what it gives."""
    return {m["extra"] or "": m["gives"] for m in ROW.finditer(GUIDE) if m["extra"] != "all"}


def _text(extra: str) -> str:
    """Everything a scenario runs, as text: each step's description, command and code."""
    steps = [*common("0"), *SCENARIOS[extra]]
    return "\n".join(s.what if isinstance(s, Serve) else f"{s.what} {' '.join(s.argv)}" for s in steps)


def test_every_extra_has_a_scenario_and_a_row() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    documented = set(extras) - {"all", "dev", "bench"}
    assert set(_rows()) == documented | {""}
    assert set(SCENARIOS) == documented | {""}


@pytest.mark.parametrize("extra", sorted(SCENARIOS))
def test_every_name_the_guide_gives_an_extra_is_run_by_its_scenario(extra: str) -> None:
    names = {
        word
        for code in re.findall(r"`([^`]+)`", _rows()[extra])
        for word in re.findall(r"[A-Za-z_][\w]+", code)
        if word not in NOT_NAMES
    }
    assert names, extra
    text = _text(extra)
    assert {n for n in names if n not in text} == set()


@pytest.mark.parametrize("extra", sorted(e for e in SCENARIOS if e))
def test_a_command_or_an_adapter_is_used_not_only_imported(extra: str) -> None:
    """Each scenario does more than an import: one step of it runs code or a command."""
    assert any(
        isinstance(step, Serve) or step.argv[0] == "flowmem" or "\n" in step.argv[-1]
        for step in SCENARIOS[extra]
    )


def _wheel(path: Path, files: dict[str, str], meta: str) -> Path:
    """A wheel with ``files`` and a dist-info holding ``meta`` as METADATA."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr("flowmem-1.0.dist-info/METADATA", meta)
        archive.writestr("flowmem-1.0.dist-info/entry_points.txt", "[console_scripts]\nflowmem = flowmem.cli:main\n")
        archive.writestr("flowmem-1.0.dist-info/licenses/LICENSE", "Apache")
        archive.writestr("flowmem-1.0.dist-info/RECORD", "")
    return path


GOOD_META = """Metadata-Version: 2.4
Name: flowmem
Version: 1.0
Summary: memory
License-Expression: Apache-2.0
License-File: LICENSE
Requires-Python: >=3.11
Classifier: Programming Language :: Python :: 3 :: Only
Classifier: Programming Language :: Python :: 3.11
Classifier: Typing :: Typed
Description-Content-Type: text/markdown
Provides-Extra: server

# flowmem
"""
SHIPPED = {name: "" for name in ("flowmem/__init__.py", "flowmem/py.typed", "flowmem/ui/static/index.html",
                                 "flowmem/ui/static/app.js", "flowmem/ui/static/repairs.js",
                                 "flowmem/ui/static/app.css")}  # fmt: skip


def test_a_right_wheel_has_no_problems(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w.whl", SHIPPED, GOOD_META)
    assert problems(wheel, version="1.0", summary="memory", extras={"server"}) == []


def test_tests_bench_files_and_wrong_metadata_are_problems(tmp_path: Path) -> None:
    files = {**SHIPPED, "tests/test_x.py": "", "flowmem/bench/run.py": "", "flowmem/test_y.py": ""}
    files.pop("flowmem/ui/static/app.js")
    meta = (GOOD_META.replace("Version: 1.0", "Version: 0.9")
            .replace("Classifier: Programming Language :: Python :: 3.11", "Classifier: Programming Language :: Python :: 3.8")
            + "").replace("Provides-Extra: server\n", "Project-URL: Source, <repository-url>\n")  # fmt: skip
    found = problems(_wheel(tmp_path / "w.whl", files, meta), version="1.0", summary="memory", extras={"server"})
    expected = ["missing flowmem/ui/static/app.js", "a file outside the package: tests/test_x.py",
                "a test, bench or repository file: flowmem/bench/run.py",
                "a test, bench or repository file: flowmem/test_y.py", "METADATA Version is '0.9', not '1.0'",
                "classifier Python 3.8 is below Requires-Python", "the wheel provides no extra 'server'"]  # fmt: skip
    for problem in expected:
        assert problem in found, (problem, found)
    assert any(p.startswith("Project-URL 'Source'") for p in found), found
