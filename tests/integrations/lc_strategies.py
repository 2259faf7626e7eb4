"""Hypothesis strategies for LangChain messages: every message class and content block kind.

Built from ``langchain_core``'s own classes. Each block strategy is paired with
the neutral flowmem part type it must map to (``None`` when a ``provider`` part is
right), so the tests check both that nothing is lost and that nothing neutral is
hidden in a provider part.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)

from flowmem.integrations.langchain import CHAT_ROLES

# Text the stores keep as is (no lone surrogates, no NUL: PostgreSQL refuses it).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
ID = st.text("abcdef0123456789_", min_size=1, max_size=6)
B64 = st.text("ABCDEFGHabcdefgh0123456789+/", min_size=4, max_size=12)
URL = st.builds(lambda s: f"https://example.com/{s}", ID)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
OBJ = st.dictionaries(TEXT, JSON, max_size=3)


# Every block ``type`` some strategy below generates (checked against LangChain's list).
GENERATED_TYPES: set[str] = set()


def _block(required: dict[str, Any], **optional: Any) -> st.SearchStrategy[dict[str, Any]]:
    if isinstance(required.get("type"), str):
        GENERATED_TYPES.add(required["type"])
    fixed = {k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in required.items()}
    return st.fixed_dictionaries(fixed, optional=optional)


CITATION = _block(
    {"type": "citation"},
    url=URL,
    title=TEXT,
    start_index=st.integers(0, 99),
    end_index=st.integers(0, 99),
    cited_text=TEXT,
)
ANTHROPIC_CITATION = _block(
    {"type": "char_location", "cited_text": TEXT, "document_index": st.integers(0, 3)},
    start_char_index=st.integers(0, 9),
    end_char_index=st.integers(0, 99),
)
EPHEMERAL = st.just({"type": "ephemeral"})
SOURCE = st.one_of(
    st.fixed_dictionaries({"url": URL}),
    st.fixed_dictionaries({"base64": B64}),
    st.fixed_dictionaries({"file_id": ID}),
)


def _v1(kind: str, mimes: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    GENERATED_TYPES.add(kind)
    return st.builds(
        lambda src, rest: {"type": kind, **src, **rest},
        SOURCE,
        st.fixed_dictionaries(
            {}, optional={"mime_type": st.sampled_from(mimes), "id": ID, "extras": OBJ}
        ),
    )


def _anthropic_source(kind: str, media: str) -> st.SearchStrategy[dict[str, Any]]:
    source = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("base64"), "media_type": st.just(media), "data": B64}
        ),
        st.fixed_dictionaries({"type": st.just("url"), "url": URL}),
        st.fixed_dictionaries({"type": st.just("file"), "file_id": ID}),
    )
    optional: dict[str, Any] = {"cache_control": EPHEMERAL}
    if kind == "document":
        optional |= {"title": TEXT, "context": TEXT, "citations": st.just({"enabled": True})}
    return _block({"type": kind, "source": source}, **optional)


# (strategy, neutral part type or None for a provider part)
NEUTRAL_BLOCKS: list[tuple[st.SearchStrategy[Any], str]] = [
    (TEXT, "text"),
    (_block({"type": "text", "text": TEXT}, id=ID, annotations=st.lists(CITATION, max_size=2), index=st.integers(0, 3)), "text"),
    (_block({"type": "text", "text": TEXT}, citations=st.lists(ANTHROPIC_CITATION, max_size=2), cache_control=EPHEMERAL), "text"),
    (_v1("image", ["image/png", "image/jpeg"]), "image"),
    (_block({"type": "image_url", "image_url": _block({"url": URL}, detail=st.sampled_from(["low", "high", "auto"]))}), "image"),
    (_block({"type": "image_url", "image_url": URL}), "image"),
    (_anthropic_source("image", "image/png"), "image"),
    (_block({"type": "image", "source_type": "url", "url": URL}, mime_type=st.just("image/png")), "image"),
    (_block({"type": "file", "source_type": "base64", "data": B64}, mime_type=st.just("application/pdf")), "file"),
    (_block({"type": "audio", "base64": B64}, mime_type=st.sampled_from(["audio/wav", "audio/mpeg"]), id=ID), "audio"),
    (_block({"type": "input_audio", "input_audio": _block({"data": B64, "format": st.sampled_from(["wav", "mp3"])})}), "audio"),
    (_v1("file", ["application/pdf", "text/csv"]), "file"),
    (_block({"type": "file", "file": _block({"file_data": st.builds(lambda b: f"data:application/pdf;base64,{b}", B64)}, filename=TEXT)}), "file"),
    (_block({"type": "file", "file": _block({"file_id": ID})}), "file"),
    (_anthropic_source("document", "application/pdf"), "file"),
    (_block({"type": "reasoning"}, reasoning=TEXT, id=ID, extras=st.fixed_dictionaries({"signature": B64})), "reasoning"),
    (_block({"type": "thinking", "thinking": TEXT}, signature=B64), "reasoning"),
    (_block({"type": "redacted_thinking", "data": B64}), "reasoning"),
    (_block({"type": "reasoning", "id": ID, "summary": st.lists(_block({"type": "summary_text", "text": TEXT}), max_size=2)}, encrypted_content=B64), "reasoning"),
]  # fmt: skip
PROVIDER_BLOCKS: list[st.SearchStrategy[Any]] = [
    _block({"type": "server_tool_call", "id": ID, "name": TEXT, "args": OBJ}),
    _block({"type": "server_tool_result", "tool_call_id": ID, "status": st.sampled_from(["success", "error"])}, output=JSON),
    _block({"type": "server_tool_use", "id": ID, "name": st.just("web_search"), "input": OBJ}),
    _block({"type": "web_search_tool_result", "tool_use_id": ID, "content": st.lists(_block({"type": "web_search_result", "url": URL, "title": TEXT, "encrypted_content": B64}), max_size=2)}),
    _block({"type": "document", "source": _block({"type": "text", "media_type": "text/plain", "data": TEXT})}, citations=st.just({"enabled": True})),
    _block({"type": "search_result", "source": URL, "title": TEXT, "content": st.lists(_block({"type": "text", "text": TEXT}), max_size=1)}),
    _block({"type": "web_search_call", "id": ID, "status": "completed", "action": _block({"type": "search", "query": TEXT})}),
    _block({"type": "server_tool_call_chunk"}, name=TEXT, args=TEXT, id=ID, index=st.integers(0, 3)),
    _block({"type": "refusal", "refusal": TEXT}, id=ID),
    _block({"type": "non_standard", "value": OBJ}),
    _block({"type": "video", "url": URL}),
    _block({"type": "text-plain", "text": TEXT, "mime_type": "text/plain"}),
    st.dictionaries(TEXT, JSON, max_size=3),
]  # fmt: skip
CALL_BLOCKS: list[st.SearchStrategy[Any]] = [
    _block({"type": "tool_call", "id": ID, "name": TEXT, "args": OBJ}),
    _block({"type": "tool_use", "id": ID, "name": TEXT, "input": OBJ}),
    _block({"type": "invalid_tool_call", "id": ID, "name": TEXT, "args": TEXT, "error": TEXT}),
    _block({"type": "tool_call_chunk", "id": ID, "name": TEXT, "args": TEXT, "index": st.integers(0, 3)}),
]  # fmt: skip

LABELLED_BLOCKS = st.one_of(
    *[s.map(lambda b, t=t: (b, t)) for s, t in NEUTRAL_BLOCKS],
    *[s.map(lambda b: (b, None)) for s in PROVIDER_BLOCKS],
)
BLOCKS = st.one_of(*[s for s, _ in NEUTRAL_BLOCKS], *PROVIDER_BLOCKS)
CONTENT = TEXT | st.lists(BLOCKS | st.one_of(*CALL_BLOCKS), max_size=4)

COMMON = {
    "id": ID,
    "name": TEXT,
    "additional_kwargs": OBJ.filter(lambda d: "tool_calls" not in d),
    "response_metadata": OBJ,
    "custom_attribute": JSON,  # LangChain messages accept extra attributes
}
TOOL_CALL = st.fixed_dictionaries({"name": TEXT, "args": OBJ, "id": st.none() | ID})
INVALID_CALL = st.fixed_dictionaries(
    {"name": st.none() | TEXT, "args": st.none() | TEXT, "id": st.none() | ID, "error": st.none() | TEXT}
)  # fmt: skip
USAGE = _block(
    {"input_tokens": st.integers(0, 99), "output_tokens": st.integers(0, 99), "total_tokens": st.integers(0, 198)},
    input_token_details=st.fixed_dictionaries({}, optional={"cache_read": st.integers(0, 9), "audio": st.integers(0, 9)}),
    output_token_details=st.fixed_dictionaries({}, optional={"reasoning": st.integers(0, 9)}),
)  # fmt: skip
AI = {
    "tool_calls": st.lists(TOOL_CALL, max_size=2),
    "invalid_tool_calls": st.lists(INVALID_CALL, max_size=1),
    "usage_metadata": USAGE,
}
CHUNK = {
    "tool_call_chunks": st.lists(
        st.fixed_dictionaries(
            {"name": st.none() | TEXT, "args": st.none() | TEXT, "id": st.none() | ID, "index": st.none() | st.integers(0, 3)}
        ),
        max_size=2,
    ),
    "chunk_position": st.just("last"),
}  # fmt: skip
TOOL = {
    "status": st.sampled_from(["success", "error"]),
    "artifact": JSON,
}
CHAT = {"role": st.sampled_from(sorted(CHAT_ROLES))}

CLASSES: list[tuple[type[BaseMessage], dict[str, Any], dict[str, Any]]] = [
    (HumanMessage, {}, {}),
    (HumanMessageChunk, {}, {}),
    (SystemMessage, {}, {}),
    (SystemMessageChunk, {}, {}),
    (AIMessage, {}, AI),
    (AIMessageChunk, {}, AI | CHUNK),
    (ToolMessage, {"tool_call_id": ID}, TOOL),
    (ToolMessageChunk, {"tool_call_id": ID}, TOOL),
    (ChatMessage, CHAT, {}),
    (ChatMessageChunk, CHAT, {}),
]


def _message(cls: type[BaseMessage], required: dict[str, Any], more: dict[str, Any]) -> Any:
    def build(content: Any, v1: bool, fields: dict[str, Any]) -> BaseMessage:
        if v1 and isinstance(content, list):
            # the v1 spelling: ``content_blocks=`` (AIMessage derives tool_calls from
            # it); standard blocks are objects, never bare strings
            blocks = [block for block in content if isinstance(block, dict)]
            return cls(content_blocks=blocks, **fields)
        return cls(content=content, **fields)

    return st.builds(
        build,
        CONTENT,
        st.booleans(),
        st.fixed_dictionaries(required, optional=COMMON | more),
    )


MESSAGES = st.one_of(*[_message(cls, req, more) for cls, req, more in CLASSES])
