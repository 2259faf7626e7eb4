"""Hypothesis strategies for sendable Gemini histories, using every part kind (tests only).

A history is ``(system_instruction, contents)`` in the shape of
``google.genai.types.Content``: user contents with text and media, model turns
with thoughts, text, code execution and function calls (with ids or, as the
older API sends them, without), each call answered by a ``function_response``
in the next user content. ``PART_BUILDERS`` is keyed by the ``types.Part``
field each builder sets, so a test can compare it with the SDK's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from flowmem.formats.gemini_parts import write_camel
from tests.formats.strategies import LOWER, word

Draw = st.DrawFn

TEXT = st.text(min_size=1, max_size=10)
ANY_TEXT = st.text(max_size=10)
B64 = st.sampled_from(["iVBORw0KGgo=", "JVBERi0xLjQ=", "UklGRiQAAABXQVZF", "AAAA", "c2lnbmF0dXJl"])
URI = st.sampled_from(
    [
        "https://generativelanguage.googleapis.com/v1beta/files/abc-123",
        "gs://bucket/report.pdf",
        "https://www.youtube.com/watch?v=9hE5-98ZeCg",
        "https://example.com/cat.png",
    ]
)
NAME = word(LOWER + "0123456789_", max_size=7, first=LOWER)
REGEXES = {r"[a-z][a-z0-9_]{0,7}": NAME}
"""This module's words and the patterns they stand for (``strategies.word``)."""
ARGS = st.dictionaries(
    st.sampled_from(["city", "n", "q", "unit"]),
    st.one_of(st.integers(-9, 99), TEXT, st.booleans(), st.none(), st.lists(st.integers(0, 9), max_size=2)),
    max_size=3,
)

# the generators' choosers, made once: a strategy made at each draw is built and validated again
INLINE_MIME = st.sampled_from(
    ["image/png", "image/jpeg", "audio/wav", "audio/mp3", "audio/ogg", "application/pdf", "video/mp4", "text/plain"]
)
FILE_MIME = st.sampled_from(["image/png", "application/pdf", "video/mp4", "audio/mp3"])
OUTCOMES = st.sampled_from(["OUTCOME_OK", "OUTCOME_FAILED"])
RESPONSE_SHAPES = st.sampled_from(["output", "result", "error", "object", "absent"])
SCHEDULING = st.sampled_from(["SILENT", "WHEN_IDLE", "INTERRUPT"])
SYSTEM_SHAPES = st.sampled_from(["none", "string", "content", "content_role"])
ANSWER_ROLES = st.sampled_from(["user", "user", "tool", "function"])


def maybe(draw: Draw, key: str, strategy: st.SearchStrategy[Any], into: dict[str, Any]) -> None:
    """Set ``into[key]`` to a drawn value half of the time."""
    if draw(st.booleans()):
        into[key] = draw(strategy)


def g_text(draw: Draw) -> dict[str, Any]:
    part: dict[str, Any] = {"text": draw(TEXT)}
    maybe(draw, "thought_signature", B64, part)
    maybe(draw, "part_metadata", st.just({"source": "ui"}), part)
    return part


def g_thought(draw: Draw) -> dict[str, Any]:
    part: dict[str, Any] = {"text": draw(ANY_TEXT), "thought": True}
    maybe(draw, "thought_signature", B64, part)
    return part


def g_inline(draw: Draw) -> dict[str, Any]:
    mime = draw(INLINE_MIME)
    part: dict[str, Any] = {"inline_data": {"mime_type": mime, "data": draw(B64)}}
    if mime.startswith("video/"):
        maybe(draw, "video_metadata", st.just({"start_offset": "1s", "end_offset": "5s", "fps": 2.0}), part)
    maybe(draw, "media_resolution", st.just({"level": "MEDIA_RESOLUTION_LOW"}), part)
    return part


def g_file(draw: Draw) -> dict[str, Any]:
    file_data: dict[str, Any] = {"file_uri": draw(URI)}
    maybe(draw, "mime_type", FILE_MIME, file_data)
    maybe(draw, "display_name", TEXT, file_data)
    return {"file_data": file_data}


def g_code(draw: Draw) -> dict[str, Any]:
    return {"executable_code": {"code": "print(6 * 7)", "language": "PYTHON"}}


def g_code_result(draw: Draw) -> dict[str, Any]:
    return {"code_execution_result": {"outcome": draw(OUTCOMES), "output": draw(ANY_TEXT)}}


def g_tool_call(draw: Draw) -> dict[str, Any]:
    return {"tool_call": {"id": "tc_" + draw(NAME), "tool_type": "GOOGLE_SEARCH_WEB", "args": {"query": draw(TEXT)}}}


def g_tool_response(draw: Draw) -> dict[str, Any]:
    return {"tool_response": {"id": "tc_" + draw(NAME), "tool_type": "GOOGLE_SEARCH_WEB", "response": {"results": []}}}


USER_PARTS: dict[str, Callable[[Draw], dict[str, Any]]] = {
    "text": g_text,
    "inline_data": g_inline,
    "file_data": g_file,
}
MODEL_PARTS: dict[str, Callable[[Draw], dict[str, Any]]] = {
    "text": g_text,
    "thought": g_thought,
    "inline_data": g_inline,
    "executable_code": g_code,
    "code_execution_result": g_code_result,
    "tool_call": g_tool_call,
    "tool_response": g_tool_response,
}
PART_BUILDERS = {**USER_PARTS, **MODEL_PARTS}
"""Part builders by the ``types.Part`` field they exercise (calls and responses are drawn apart)."""
USER_PART = st.sampled_from(list(USER_PARTS.values()))
MODEL_PART = st.sampled_from(list(MODEL_PARTS.values()))
STATUS = st.fixed_dictionaries({}, optional={"status": st.just("ok")})


def g_call(draw: Draw, cid: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": draw(NAME)}
    if cid is not None:
        call["id"] = cid
    if draw(st.integers(0, 4)):
        call["args"] = draw(ARGS)
    part: dict[str, Any] = {"function_call": call}
    maybe(draw, "thought_signature", B64, part)
    return part


def g_response(draw: Draw, call: dict[str, Any]) -> dict[str, Any]:
    function = call["function_call"]
    response: dict[str, Any] = {"name": function["name"]}
    if "id" in function:
        response["id"] = function["id"]
    shape = draw(RESPONSE_SHAPES)
    if shape in ("output", "result", "error"):
        response["response"] = {shape: draw(ANY_TEXT)}
    elif shape == "object":
        response["response"] = {"result": draw(ARGS), **draw(STATUS)}
    if draw(st.integers(0, 3)) == 0:
        response["parts"] = [{"inline_data": {"mime_type": "image/png", "data": draw(B64)}}]
    maybe(draw, "will_continue", st.booleans(), response)
    maybe(draw, "scheduling", SCHEDULING, response)
    return {"function_response": response}


@st.composite
def gemini_histories(draw: Draw, camel: bool | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """Draw a sendable ``(system_instruction, contents)``; camelCase when ``camel`` (drawn when None)."""
    system: Any = None
    shape = draw(SYSTEM_SHAPES)
    if shape == "string":
        system = draw(TEXT)
    elif shape != "none":
        system = {"parts": [{"text": draw(TEXT)} for _ in range(draw(st.integers(1, 2)))]}
        if shape == "content_role":
            system = {"role": "system", **system}
    with_ids = draw(st.booleans())
    serial = iter(range(1, 1000))
    contents: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            parts = [draw(USER_PART)(draw) for _ in range(draw(st.integers(1, 3)))]
            content: dict[str, Any] = {"role": "user", "parts": parts}
            if draw(st.integers(0, 5)) == 0:
                del content["role"]  # the SDK reads a content without a role as the user's
            contents.append(content)
            continue
        parts = [draw(MODEL_PART)(draw) for _ in range(draw(st.integers(0, 3)))]
        calls = [g_call(draw, f"call_{next(serial)}" if with_ids else None) for _ in range(draw(st.integers(0, 3)))]
        if not parts and not calls:
            continue
        turn = draw(st.permutations(parts + calls)) if draw(st.booleans()) else parts + calls
        contents.append({"role": "model", "parts": list(turn)})
        if calls:
            ordered = [c for c in turn if "function_call" in c]
            if with_ids:
                ordered = draw(st.permutations(ordered))
            answer = [g_response(draw, call) for call in ordered]
            role = draw(ANSWER_ROLES)
            if role == "user" and draw(st.booleans()):
                answer.append({"text": draw(TEXT)})
            contents.append({"role": role, "parts": answer})
    if camel if camel is not None else draw(st.booleans()):
        contents = write_camel(contents)
        system = write_camel(system)
    return system, contents
