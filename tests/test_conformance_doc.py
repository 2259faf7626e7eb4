"""``docs/conformance.md`` covers every GR-MEM rule, and every test it names exists."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "conformance.md"
SPEC = REPO.parent / "shared" / "spec" / "GR-MEM.md"
# Used only when the shared spec folder is not beside the clone.
FALLBACK_IDS = [f"MEM-{n}" for n in range(1, 17)]

TEST_REF = re.compile(r"`(tests/[\w/.-]+\.py)::([\w:]+)`")
SECTION = re.compile(r"^## (MEM-\d+) — ", re.M)


def spec_rules() -> dict[str, tuple[str, str] | None]:
    """Return each rule id of the spec with (level, profiles), or None without the spec."""
    if not SPEC.exists():
        return dict.fromkeys(FALLBACK_IDS)
    text = SPEC.read_text(encoding="utf-8")
    found = re.findall(r"^## (MEM-\d+) — .+\n\*(\w+) · ([^*]+)\*", text, re.M)
    ids = re.findall(r"^## (MEM-\d+) ", text, re.M)
    assert ids, f"no rule headings found in {SPEC}"
    levels = {rid: (level, profiles.strip()) for rid, level, profiles in found}
    return {rid: levels.get(rid) for rid in ids}


def doc_sections() -> dict[str, str]:
    """Return the body of each ``## MEM-N`` section of the doc."""
    text = DOC.read_text(encoding="utf-8")
    starts = [(m.group(1), m.start()) for m in SECTION.finditer(text)]
    bodies: dict[str, str] = {}
    for index, (rid, start) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(text)
        following = text.find("\n## ", start + 1)
        if following != -1:
            end = min(end, following + 1)
        assert rid not in bodies, f"{rid} has two sections"
        bodies[rid] = text[start:end]
    return bodies


@cache
def defined_names(path: Path) -> frozenset[str]:
    """Return ``name`` and ``Class::name`` for every function defined in a test file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}::{item.name}")
    return frozenset(names)


def test_every_spec_rule_has_a_section_with_its_level_and_profiles() -> None:
    sections = doc_sections()
    for rid, stated in spec_rules().items():
        assert rid in sections, f"{rid} is missing from docs/conformance.md"
        if stated is not None:
            level, profiles = stated
            assert f"- Level: {level}\n" in sections[rid], f"{rid}: level should be {level}"
            assert f"- Profiles: {profiles}\n" in sections[rid], (
                f"{rid}: profiles should be {profiles}"
            )


def test_no_section_for_a_rule_the_spec_lacks() -> None:
    assert set(doc_sections()) <= set(spec_rules())


def test_every_rule_lists_tests_or_says_not_yet() -> None:
    for rid, body in doc_sections().items():
        assert "- Status: " in body, f"{rid} has no status"
        assert "- Tests:" in body, f"{rid} has no tests list"
        has_tests = TEST_REF.search(body) is not None
        not_yet = re.search(r"not yet — issue \d+", body) is not None
        assert has_tests or not_yet, f"{rid} names no test and no issue"


def _references() -> list[tuple[str, str]]:
    return TEST_REF.findall(DOC.read_text(encoding="utf-8"))


def test_the_doc_names_tests() -> None:
    assert len(_references()) >= 16


def test_every_named_test_exists() -> None:
    missing: list[str] = []
    for path, name in _references():
        file = REPO / path
        if not file.is_file():
            missing.append(f"{path}::{name} (no such file)")
        elif not (name.startswith("test_") or "::test_" in name):
            missing.append(f"{path}::{name} (not a test)")
        elif name not in defined_names(file):
            missing.append(f"{path}::{name} (no such test in the file)")
    assert not missing, "docs/conformance.md names tests that do not exist:\n" + "\n".join(missing)


def test_mem_rule_tests_are_listed_under_their_rule() -> None:
    """A ``test_mem_N_...`` name listed under another rule is probably a typo."""
    for rid, body in doc_sections().items():
        number = rid.split("-")[1]
        for _, name in TEST_REF.findall(body):
            function = name.split("::")[-1]
            rules = {n for g in re.findall(r"mem_(\d+(?:_\d+)*)", function) for n in g.split("_")}
            if rules:
                assert number in rules, f"{function} is listed under {rid}"
