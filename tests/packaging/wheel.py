"""What a built wheel must hold: its metadata and its files (pure: reads the zip, runs nothing)."""

from __future__ import annotations

import hashlib
import re
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

REQUIRED_FILES = ("flowmem/py.typed", "flowmem/ui/static/index.html", "flowmem/ui/static/app.js",
                  "flowmem/ui/static/repairs.js", "flowmem/ui/static/app.css")  # fmt: skip
# a path with one of these parts is a test, a bench or a file of the repository, never shipped
FORBIDDEN_PARTS = {"tests", "test", "bench", "benchmarks", "scripts", "examples", "docs", "__pycache__"}
REQUIRED_CLASSIFIERS = ("Programming Language :: Python :: 3 :: Only", "Typing :: Typed")
ENTRY_POINT = "flowmem = flowmem.cli:main"


def metadata(wheel: Path) -> Message:
    """The wheel's ``METADATA`` (core metadata, an email-style header block)."""
    with zipfile.ZipFile(wheel) as archive:
        return Parser().parsestr(archive.read(_dist_info(archive) + "METADATA").decode("utf-8"))


def contents(wheel: Path) -> dict[str, str]:
    """Each file of the wheel (RECORD aside) with the sha256 of its bytes."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


def problems(wheel: Path, *, version: str, summary: str, extras: set[str]) -> list[str]:
    """Every way the wheel's metadata or files are wrong (empty: none)."""
    meta = metadata(wheel)
    found = [*_metadata_problems(meta, version=version, summary=summary, extras=extras)]
    names = set(contents(wheel))
    found += _file_problems(names)
    with zipfile.ZipFile(wheel) as archive:
        dist_info = _dist_info(archive)
        points = archive.read(dist_info + "entry_points.txt").decode("utf-8")
    if ENTRY_POINT not in [line.strip() for line in points.splitlines()]:
        found.append(f"entry_points.txt has no console script {ENTRY_POINT!r}")
    for license_file in meta.get_all("License-File") or ():
        if f"{dist_info}licenses/{license_file}" not in names:
            found.append(f"License-File {license_file} is not in {dist_info}licenses/")
    return found


def _metadata_problems(meta: Message, *, version: str, summary: str, extras: set[str]) -> list[str]:
    """What is wrong in the core metadata: name, version, summary, license, Python, URLs, extras."""
    found: list[str] = []
    expected = {
        "Name": "flowmem",
        "Version": version,
        "Summary": summary,
        "License-Expression": "Apache-2.0",
        "Requires-Python": ">=3.11",
        "Description-Content-Type": "text/markdown",
    }
    for field, value in expected.items():
        if meta.get(field) != value:
            found.append(f"METADATA {field} is {meta.get(field)!r}, not {value!r}")
    if "LICENSE" not in (meta.get_all("License-File") or ()):
        found.append("METADATA names no License-File LICENSE")
    classifiers = meta.get_all("Classifier") or []
    found += [f"no classifier {c!r}" for c in REQUIRED_CLASSIFIERS if c not in classifiers]
    found += [f"a license classifier beside License-Expression: {c!r}"
              for c in classifiers if c.startswith("License ::")]  # fmt: skip
    pythons = [c.rsplit(" :: ", 1)[1] for c in classifiers
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]  # fmt: skip
    if not pythons:
        found.append("no classifier names a Python 3.x version")
    found += [f"classifier Python {v} is below Requires-Python"
              for v in pythons if int(v.split(".")[1]) < 11]  # fmt: skip
    for url in meta.get_all("Project-URL") or ():
        label, _, address = url.partition(", ")
        if not address.startswith("https://") or "<" in address or "example" in address:
            found.append(f"Project-URL {label!r} is not a real https address: {address!r}")
    provided = set(meta.get_all("Provides-Extra") or ())
    found += [f"the wheel provides no extra {e!r}" for e in sorted(extras - provided)]
    if not str(meta.get_payload()).lstrip().startswith("# flowmem"):
        found.append("the long description is not README.md")
    return found


def _file_problems(names: set[str]) -> list[str]:
    """What is wrong in the file list: a test or bench file shipped, a needed file missing."""
    found = [f"missing {name}" for name in REQUIRED_FILES if name not in names]
    for name in sorted(names):
        parts = name.split("/")
        top = parts[0]
        if not (top == "flowmem" or re.fullmatch(r"flowmem-[^/]+\.dist-info", top)):
            found.append(f"a file outside the package: {name}")
        elif FORBIDDEN_PARTS & set(parts[:-1]) or re.fullmatch(r"(test_.*|.*_test|conftest)\.py", parts[-1]):
            found.append(f"a test, bench or repository file: {name}")
        elif name.endswith((".pyc", ".pyo")):
            found.append(f"compiled bytecode: {name}")
    return found


def _dist_info(archive: zipfile.ZipFile) -> str:
    """The ``flowmem-<version>.dist-info/`` directory of the wheel."""
    tops = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" in name}
    if len(tops) != 1:
        raise ValueError(f"the wheel has {len(tops)} .dist-info directories: {sorted(tops)}")
    return tops.pop() + "/"
