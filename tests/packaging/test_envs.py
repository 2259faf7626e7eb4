"""The packaging check's venvs: uv installs what pip installs (decision 0184).

``fresh_venv`` installs each extra's venv with uv where the dev venv has it; these
tests install small wheels made here, from a wheelhouse made here, with both
installers, and compare what each venv holds: the same distributions at the same
versions (an extra's dependencies only with the extra, the highest version the
wheelhouse has, nothing else), the same files with the same bytes, no bytecode.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.packaging.envs import fresh_venv, uv_binary, uv_cache

INSTALLERS = [
    "pip",
    pytest.param("uv", marks=pytest.mark.skipif(uv_binary() is None, reason="no uv")),
]


def _wheel(
    house: Path, name: str, version: str, *requires: str, extras: tuple[str, ...] = ()
) -> Path:
    """A pure-Python wheel of one module ``name`` (a function giving its version), with a RECORD."""
    dist = f"{name}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Provides-Extra: {extra}" for extra in extras]
    metadata += [f"Requires-Dist: {requirement}" for requirement in requires]
    files = {
        f"{name}/__init__.py": f"def version():\n    return {version!r}\n",
        f"{dist}/METADATA": "\n".join(metadata) + "\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    wheel = house / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _held(venv: Path) -> dict[str, object]:
    """What a venv holds: its distributions and versions, each module's source, any bytecode."""
    code = """
import importlib.metadata as m, json, pathlib, sys
site = pathlib.Path(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
dists = sorted((d.metadata["Name"], d.version) for d in m.distributions())
sources = {str(p.relative_to(site)): p.read_text() for p in sorted(site.rglob("*.py"))}
print(json.dumps({"dists": dists, "sources": sources, "pyc": [str(p) for p in site.rglob("*.pyc")]}))
"""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    held: dict[str, object] = json.loads(done.stdout)
    return held


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str | None], Path]:
    """Venvs of ``app`` with and without its extra ``x`` (which needs ``dep>=1``), by each installer.

    The wheelhouse holds ``app``, ``dep`` 1.0 and 2.0 and an unrelated ``other``.
    """
    house = tmp_path_factory.mktemp("wheelhouse")
    app = _wheel(house, "app", "1.0", 'dep>=1; extra == "x"', extras=("x",))
    _wheel(house, "dep", "1.0")
    _wheel(house, "dep", "2.0")
    _wheel(house, "other", "1.0")
    made = {}
    for installer in ("pip", "uv") if uv_binary() is not None else ("pip",):
        for extra in (None, "x"):
            path = tmp_path_factory.mktemp(f"{installer}-{extra}")
            fresh_venv(path / "venv", app, extra, house, installer=installer)
            made[installer, extra] = path / "venv"
    return made


@pytest.mark.parametrize("extra", [None, "x"])
def test_uv_installs_what_pip_installs(
    venvs: dict[tuple[str, str | None], Path], extra: str | None
) -> None:
    if uv_binary() is None:
        pytest.skip("no uv in this venv")
    held = {installer: _held(venvs[installer, extra]) for installer in ("pip", "uv")}
    assert held["uv"] == held["pip"]
    expected = [["app", "1.0"], ["dep", "2.0"]] if extra else [["app", "1.0"]]
    assert held["pip"]["dists"] == expected
    assert held["pip"]["pyc"] == []


@pytest.mark.parametrize("installer", INSTALLERS)
def test_an_undeclared_dependency_is_not_there(
    venvs: dict[tuple[str, str | None], Path], installer: str
) -> None:
    python = str(venvs[installer, None] / "bin" / "python")
    assert subprocess.run([python, "-c", "import dep"], capture_output=True).returncode != 0
    python = str(venvs[installer, "x"] / "bin" / "python")
    assert subprocess.run([python, "-c", "import dep"], capture_output=True).returncode == 0


@pytest.mark.parametrize("installer", INSTALLERS)
def test_a_requirement_the_wheelhouse_lacks_fails_the_install(
    tmp_path: Path, installer: str
) -> None:
    house = tmp_path / "house"
    house.mkdir()
    app = _wheel(house, "app", "1.0", "absent>=1")
    with pytest.raises(subprocess.CalledProcessError):
        fresh_venv(tmp_path / "venv", app, None, house, installer=installer)


def test_uvs_cache_is_beside_the_wheelhouse_and_an_unknown_installer_is_refused(
    tmp_path: Path,
) -> None:
    assert uv_cache(tmp_path / "packaging-wheelhouse") == tmp_path / "packaging-wheelhouse-uv-cache"
    with pytest.raises(ValueError, match="unknown installer"):
        fresh_venv(tmp_path / "venv", tmp_path / "app.whl", None, tmp_path, installer="conda")
