"""``python -m tests.packaging``: the packaging check (``make packaging``, part of ``make test``).

Builds the sdist and the wheel once, checks them, then installs the wheel with each
documented extra alone into a fresh venv, two at a time, and runs that extra's
scenario. Prints one line per install and closes with ``N passed, N failed``; exit 1
on any failure. ``--only EXTRA`` (repeatable; ``base`` for no extra) runs some.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.packaging.build import build, sdist_problems, source_tree, wheel_differences
from tests.packaging.bytecode import harvest
from tests.packaging.envs import fill_wheelhouse, fresh_venv, uv_cache
from tests.packaging.scenarios import SCENARIOS, common
from tests.packaging.wheel import problems

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / "build" / "packaging-wheelhouse"


def main() -> int:
    """Run the check; the exit code (0: every install did what the guide says)."""
    parser = argparse.ArgumentParser(prog="python -m tests.packaging", description=__doc__)
    parser.add_argument("--only", action="append", metavar="EXTRA", help="run this extra's scenario only")
    parser.add_argument("--jobs", type=int, default=2, help="installs at once (default 2)")
    parser.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help=f"(default {WHEELHOUSE})")
    parser.add_argument("--keep", action="store_true", help="keep the venvs and print where")
    options = parser.parse_args()
    extras = [("" if e == "base" else e) for e in options.only] if options.only else list(SCENARIOS)
    unknown = [e for e in extras if e not in SCENARIOS]
    if unknown:
        parser.error(f"no scenario for {unknown}; known: base, {', '.join(e for e in SCENARIOS if e)}")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="flowmem-packaging-"))
    failures: dict[str, str] = {}  # what failed (the build, or an install) -> why
    try:
        wheel, version, found = _build_and_inspect(work)
        if found:
            failures["the sdist and the wheel"] = "\n".join(found)
        print(f"built {wheel.name} and its sdist; wheel metadata and files: "
              f"{'ok' if not found else f'{len(found)} problem(s)'} ({time.monotonic() - started:.1f} s)")  # fmt: skip
        source = fill_wheelhouse(wheel, options.wheelhouse)
        print(f"wheelhouse {options.wheelhouse} from {source} ({time.monotonic() - started:.1f} s)")
        with ThreadPoolExecutor(max(1, options.jobs)) as pool:
            runs = pool.map(lambda e: _install_and_run(e, wheel, version, work, options.wheelhouse), extras)
            for run in runs:
                name = f"[{run.extra}]" if run.extra else "base"
                print(f"{'ok  ' if run.error is None else 'FAIL'} {name:<16} {run.seconds:5.1f} s "
                      f"(install {run.install_seconds:4.1f} s)", flush=True)  # fmt: skip
                if run.error is not None:
                    failures[name] = run.error
    finally:
        if options.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for name, why in failures.items():
        print(f"\n{name}: {why}", file=sys.stderr)
    passed = len(extras) + 1 - len(failures)
    print(f"packaging: {passed} passed, {len(failures)} failed in {time.monotonic() - started:.1f} s")
    return 1 if failures else 0


def _build_and_inspect(work: Path) -> tuple[Path, str, list[str]]:
    """Build the sdist, the wheel from it and a wheel from the source tree; the wheel, its version, problems.

    All three from one copy of the source files, so nothing the checkout's own ``build/``
    holds from an earlier build gets in, and nothing written meanwhile either.
    """
    tree = source_tree(ROOT, work / "tree")  # one snapshot: the work tree may change meanwhile
    built = build(tree, work / "dist")
    sdist = next(p for p in built if p.name.endswith(".tar.gz"))
    wheel = next(p for p in built if p.suffix == ".whl")
    direct = build(tree, work / "direct", sdist=False)[0]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = _source_version()
    found = sdist_problems(sdist) + wheel_differences(wheel, direct)
    found += problems(wheel, version=version, summary=project["description"],
                      extras={e for e in SCENARIOS if e})  # fmt: skip
    return wheel, version, found


def _source_version() -> str:
    """``flowmem.__version__`` as the source says it (the one version, decision 0102)."""
    text = (ROOT / "src" / "flowmem" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if found is None:
        raise SystemExit("src/flowmem/__init__.py has no __version__")
    return found.group(1)


def _install_and_run(extra: str, wheel: Path, version: str, work: Path, house: Path) -> Outcome:
    """Install the wheel with ``extra`` into a fresh venv and run its scenario."""
    started = time.monotonic()
    home = work / (extra or "base")
    venv, workdir = home / "venv", home / "work"
    workdir.mkdir(parents=True)
    installed = 0.0
    try:
        fresh_venv(venv, wheel, extra, house)
        installed = time.monotonic() - started
        for step in [*common(version), *SCENARIOS[extra]]:
            step.run(venv, workdir)
        harvest(venv, uv_cache(house))  # its bytecode for the venvs installed after it (decision 0196)
    except Exception as exc:
        detail = getattr(exc, "stderr", None) or ""
        return Outcome(extra, installed, time.monotonic() - started, f"{exc}\n{detail}".rstrip())
    return Outcome(extra, installed, time.monotonic() - started, None)


@dataclass(frozen=True)
class Outcome:
    """One install's result: how long the install and the whole took, and why it failed (None: it did not)."""

    extra: str
    install_seconds: float
    seconds: float
    error: str | None


if __name__ == "__main__":
    sys.exit(main())
