"""One thing a scenario does in its venv (a command or a Python snippet) and what it must show."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class StepFailed(AssertionError):
    """A step's command did not do what the scenario says (the message shows its output)."""


@dataclass(frozen=True)
class Run:
    """A command in the venv: ``argv[0]`` ``flowmem`` or ``python`` is the venv's own.

    ``returncode`` None means any failure (non-zero). Each text of ``says`` must be in
    its output (stdout and stderr); a traceback never may.
    """

    what: str
    argv: tuple[str, ...]
    returncode: int | None = 0
    says: tuple[str, ...] = ()
    stdin: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 120

    def run(self, venv: Path, workdir: Path) -> str:
        """Run the command in ``workdir``; its output, or StepFailed."""
        head, *rest = self.argv
        program = str(venv / "bin" / head) if head in ("flowmem", "python") else head
        done = subprocess.run(
            [program, *rest], cwd=workdir, env={**clean_env(venv), **self.env}, input=self.stdin or "",
            capture_output=True, text=True, timeout=self.timeout,
        )  # fmt: skip
        output = done.stdout + done.stderr
        wrong = []
        if self.returncode is None and done.returncode == 0:
            wrong.append("exit 0, expected a failure")
        elif self.returncode is not None and done.returncode != self.returncode:
            wrong.append(f"exit {done.returncode}, expected {self.returncode}")
        wrong += [f"output lacks {text!r}" for text in self.says if text not in output]
        if "Traceback (most recent call last)" in output:
            wrong.append("a traceback")
        if wrong:
            raise StepFailed(f"{self.what}: {'; '.join(wrong)}\n$ {' '.join(self.argv)}\n{_tail(output)}")
        return output


def python(what: str, code: str, **options: object) -> Run:
    """A Python snippet run by the venv's interpreter (dedented); it must exit 0 unless told."""
    return Run(what, ("python", "-c", textwrap.dedent(code)), **options)  # type: ignore[arg-type]


def clean_env(venv: Path) -> dict[str, str]:
    """This environment for a command in ``venv``: its bin first, none of flowmem's or Python's settings."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("FLOWMEM_", "PYTHON", "VIRTUAL_ENV", "PIP_", "OTEL_", "TIKTOKEN_"))
    }  # fmt: skip
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _tail(output: str, lines: int = 25) -> str:
    """The last lines of a command's output, indented."""
    return textwrap.indent("\n".join(output.rstrip().splitlines()[-lines:]), "    ")
