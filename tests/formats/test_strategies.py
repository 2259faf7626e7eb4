"""The formats' generators: each ``word`` draws only strings of the pattern it stands for."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.formats import gemini_members, members, strategies

WORDS = {**strategies.REGEXES, **members.REGEXES, **gemini_members.REGEXES}


@pytest.mark.parametrize("pattern", sorted(WORDS))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_word_draws_strings_of_its_pattern(pattern: str, data: st.DataObject) -> None:
    assert re.fullmatch(pattern, data.draw(WORDS[pattern]))
