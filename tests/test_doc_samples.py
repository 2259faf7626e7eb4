"""Every ```python block in docs/ runs as written (docs/guide.md, "Samples in the docs").

The blocks of one document run in order in one namespace, in a temporary directory,
so a later block may use what an earlier one defined. A block whose first line is
``# doc-test: skip (<reason>)`` is not run here (it needs a model key or a network);
the reason must say what runs it instead, or why nothing can.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
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


# documents whose samples talk to a server: the test starts one and names it in
# $FLOWMEM_URL, with a user token in $FLOWMEM_TOKEN and an admin one in $FLOWMEM_ADMIN_TOKEN
SERVED = {"client.md", "integrations.md", "sharing.md"}


@contextmanager
def _server_for(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if doc.name not in SERVED:
        yield
        return
    from tests.client.conftest import serve

    with serve(f"sqlite:///{tmp_path}/docs.db", tmp_path) as server:
        monkeypatch.setenv("FLOWMEM_URL", server.url)
        monkeypatch.setenv("FLOWMEM_TOKEN", server.tokens["alice"])
        monkeypatch.setenv("FLOWMEM_ADMIN_TOKEN", server.tokens["admin"])
        yield


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda doc: str(doc.relative_to(DOCS)))
def test_every_python_sample_runs(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(access, "HOOKS", [])  # docs/access.md registers a hook
    with _server_for(doc, tmp_path, monkeypatch):
        _run_samples(doc)


def _run_samples(doc: Path) -> None:
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
