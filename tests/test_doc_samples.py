"""Every ```python block in docs/ runs as written (docs/guide.md, "Samples in the docs").

The blocks of one document run in order in one namespace, in a temporary directory,
so a later block may use what an earlier one defined. A block whose first line is
``# doc-test: skip (<reason>)`` is not run here (it needs a model key or a network);
the reason must say what runs it instead, or why nothing can.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from flowmem import access

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"# doc-test: skip \((?P<reason>[^)]+)\)")


def _blocks(doc: Path) -> list[str]:
    return BLOCK.findall(doc.read_text(encoding="utf-8"))


DOCUMENTS = sorted(doc for doc in DOCS.rglob("*.md") if _blocks(doc))


def test_the_docs_have_python_samples() -> None:
    assert len(DOCUMENTS) >= 8  # access, backends, formats, guide, integrations, memory, nodes, runtime


def test_skipped_samples_are_rare_and_say_why() -> None:
    firsts = [block.splitlines()[0] for doc in DOCUMENTS for block in _blocks(doc)]
    skipped = [line for line in firsts if line.startswith("# doc-test:")]
    assert all(SKIP.fullmatch(line) for line in skipped), skipped
    assert len(skipped) <= len(firsts) // 5, skipped


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda doc: str(doc.relative_to(DOCS)))
def test_every_python_sample_runs(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(access, "HOOKS", [])  # docs/access.md registers a hook
    namespace: dict[str, object] = {"__name__": "__doc_sample__"}
    for number, block in enumerate(_blocks(doc), start=1):
        if SKIP.fullmatch(block.splitlines()[0]):
            continue
        with warnings.catch_warnings():
            # langchain-core's RunnableWithMessageHistory is deprecated upstream.
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                code = compile(block, f"{doc.name} block {number}", "exec", dont_inherit=True)
                exec(code, namespace)
            except Exception as exc:
                pytest.fail(f"{doc.name} block {number} fails: {type(exc).__name__}: {exc}")
