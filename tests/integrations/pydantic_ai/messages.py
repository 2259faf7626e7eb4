"""Messages the pydantic-ai tests save: every part kind, and small turns of a conversation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """A fixed time ``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


def prompt(text: str, t: float = 0, run: str | None = "r1") -> ModelRequest:
    """A user's turn."""
    return ModelRequest(parts=[UserPromptPart(text, timestamp=at(t))], timestamp=at(t), run_id=run)


def answer(text: str, t: float = 1, run: str | None = "r1") -> ModelResponse:
    """A model's text answer."""
    return ModelResponse(parts=[TextPart(text)], timestamp=at(t), model_name="m", run_id=run)


def call(*ids: str, t: float = 1, run: str | None = "r1", tool: str = "get") -> ModelResponse:
    """A model response calling ``tool`` once per id."""
    parts = [ToolCallPart(tool, {"x": i}, tool_call_id=cid) for i, cid in enumerate(ids)]
    return ModelResponse(parts=parts, timestamp=at(t), model_name="m", run_id=run)


def result(*ids: str, t: float = 2, run: str | None = "r1", tool: str = "get") -> ModelRequest:
    """A request returning one result per call id."""
    parts = [ToolReturnPart(tool, f"v-{cid}", tool_call_id=cid, timestamp=at(t)) for cid in ids]
    return ModelRequest(parts=parts, timestamp=at(t), run_id=run)


def turn(i: int) -> list[ModelMessage]:
    """Turn ``i`` of a conversation: its prompt, a call, its result and an answer, timed 4·i onwards."""
    run = f"r{i}"
    return [
        prompt(f"q{i}", t=4 * i, run=run),
        call(f"c{i}", t=4 * i + 1, run=run),
        result(f"c{i}", t=4 * i + 2, run=run),
        answer(f"a{i}", t=4 * i + 3, run=run),
    ]


def every_part_kind() -> list[ModelMessage]:
    """A history holding every part kind pydantic-ai has, with every message field set."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("be brief", timestamp=at(0)),
                UserPromptPart(
                    [
                        "look at these",
                        ImageUrl("https://example.com/a.png"),
                        AudioUrl("https://example.com/a.mp3"),
                        DocumentUrl("https://example.com/a.pdf"),
                        BinaryContent(b"\x89PNG\r\n\x00\xff", media_type="image/png"),
                        UploadedFile("file-123", "openai", media_type="application/pdf"),
                    ],
                    timestamp=at(0),
                ),
            ],
            timestamp=at(0),
            instructions="answer in French",
            run_id="r1",
            conversation_id="c1",
            metadata={"app": {"k": [1, 2]}},
        ),
        ModelResponse(
            parts=[
                ThinkingPart("let me think", id="th1", signature="sig==", provider_name="anthropic"),
                NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="n1", provider_name="openai"),
                NativeToolReturnPart("web_search", {"hits": 3}, tool_call_id="n1", timestamp=at(1)),
                TextPart("calling"),
                ToolCallPart("get", {"x": 1}, tool_call_id="c1"),
                ToolCallPart("bad", '{"x": ', tool_call_id="c2"),
                FilePart(BinaryContent(b"\x00\x01", media_type="image/jpeg")),
                CompactionPart("summary so far", id="cp1", provider_name="openai"),
            ],
            usage=RequestUsage(input_tokens=10, output_tokens=5, details={"reasoning": 2}),
            model_name="gpt-x",
            timestamp=at(1),
            provider_name="openai",
            provider_details={"finish_reason": "tool_calls", "nested": {"a": None}},
            provider_response_id="resp-1",
            run_id="r1",
            conversation_id="c1",
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("get", {"value": [1, "two"]}, tool_call_id="c1", timestamp=at(2)),
                ToolReturnPart(
                    "bad", "args were not JSON", tool_call_id="c2", timestamp=at(2), outcome="retried"
                ),
            ],
            timestamp=at(2),
            run_id="r1",
            conversation_id="c1",
        ),
        ModelResponse(parts=[TextPart("done")], timestamp=at(3), run_id="r1", model_name="gpt-x"),
        ModelRequest(
            parts=[
                RetryFeedbackPart(
                    "answer with a number", retry=RetryInfo("validation_error", attempt=1), timestamp=at(4)
                )
            ],
            timestamp=at(4),
            run_id="r1",
        ),
        ModelResponse(parts=[TextPart("42")], timestamp=at(5), run_id="r1"),
    ]


def round_tripped(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What ``ModelMessagesTypeAdapter`` gives back for ``messages`` (the equality to keep)."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
