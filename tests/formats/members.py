"""Generators for every member of the providers' request-type unions (tests only).

Each union the formats read is listed here member by member (the SDK classes are
the keys), so ``test_sdk_members.py`` can compare these maps with
``typing.get_args`` of the installed SDK's unions: a member the SDK adds and the
generators do not cover fails that test. The history strategies build sendable
request histories (system first, every call answered right after its turn) out
of these members.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from anthropic import types as A
from anthropic.types import message_param as a_message
from anthropic.types import tool_result_block_param as a_tool_result
from hypothesis import strategies as st
from openai.types import chat as C
from openai.types.chat import chat_completion_content_part_param as c_part
from openai.types.responses import (
    ResponseCodeInterpreterToolCallParam,
    ResponseCompactionItemParamParam,
    ResponseComputerToolCallParam,
    ResponseConfigurationUpdateItemParamParam,
    ResponseCustomToolCallOutputParam,
    ResponseCustomToolCallParam,
    ResponseFileSearchToolCallParam,
    ResponseFunctionToolCallParam,
    ResponseFunctionWebSearchParam,
    ResponseInputFileParam,
    ResponseInputImageParam,
    ResponseInputTextParam,
    ResponseOutputMessageParam,
    ResponseReasoningItemParam,
    ResponseToolSearchOutputItemParamParam,
)
from openai.types.responses import response_input_item_param as RI
from openai.types.responses.easy_input_message_param import EasyInputMessageParam

from tests.formats.strategies import ALNUM, LOWER, word

Draw = st.DrawFn
Builder = Callable[[Draw], dict[str, Any]]

TEXT = st.text(min_size=1, max_size=10)
B64 = st.sampled_from(["iVBORw0KGgo=", "JVBERi0xLjQ=", "UklGRiQAAABXQVZF", "AAAA"])
URL = st.sampled_from(["https://example.com/a.png", "https://example.com/doc.pdf", "https://x.org/i.jpg"])
FILE_ID = st.sampled_from(["file-abc123", "file-6F2ksmvXxt4V"])
ARGS = st.dictionaries(st.sampled_from(["a", "city", "n"]), st.one_of(st.integers(-9, 99), TEXT), max_size=2)
CACHE = st.sampled_from([{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])
ID4 = word(LOWER + "0123456789", 4, 4)
LOWER3 = word(LOWER, 3, 3)
ALNUM5 = word(ALNUM, 5, 5)
ALNUM6 = word(ALNUM, 6, 6)
REGEXES = {r"[a-z0-9]{4}": ID4, r"[a-z]{3}": LOWER3, r"[A-Za-z0-9]{5}": ALNUM5, r"[A-Za-z0-9]{6}": ALNUM6}
"""This module's words and the patterns they stand for (``strategies.word``)."""


_PICKS: dict[int, st.SearchStrategy[Any]] = {}


_ONES: dict[tuple[Any, ...], st.SearchStrategy[Any]] = {}


def one(*values: Any) -> st.SearchStrategy[Any]:
    """``st.sampled_from(values)``, made once per tuple of values (not at every draw)."""
    made = _ONES.get(values)
    if made is None:
        made = _ONES[values] = st.sampled_from(values)
    return made


def pick(builders: dict[Any, Any]) -> st.SearchStrategy[Any]:
    """``st.sampled_from`` of a module map's builders, made once per map (not at every draw)."""
    made = _PICKS.get(id(builders))
    if made is None:
        made = _PICKS[id(builders)] = st.sampled_from(list(builders.values()))
    return made


def maybe(draw: Draw, key: str, strategy: st.SearchStrategy[Any], into: dict[str, Any]) -> None:
    """Set ``into[key]`` to a drawn value half of the time."""
    if draw(st.booleans()):
        into[key] = draw(strategy)


def arguments(draw: Draw) -> str:
    """A JSON arguments text, spelled compactly or with spaces, as models do."""
    separators = draw(one((",", ":"), (", ", ": ")))
    return json.dumps(draw(ARGS), separators=separators, ensure_ascii=draw(st.booleans()))


class Ids:
    """Fresh call ids for one history (normalization drops a repeated id)."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self, prefix: str = "call") -> str:
        return f"{prefix}_{next(self._next)}"


# --- OpenAI Chat ---------------------------------------------------------------------------


def chat_text(draw: Draw) -> dict[str, Any]:
    return {"type": "text", "text": draw(TEXT)}


def chat_image(draw: Draw) -> dict[str, Any]:
    url = draw(st.one_of(URL, B64.map(lambda d: "data:image/png;base64," + d)))
    image: dict[str, Any] = {"url": url}
    maybe(draw, "detail", one("auto", "low", "high"), image)
    return {"type": "image_url", "image_url": image}


def chat_audio(draw: Draw) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": draw(B64), "format": draw(one("wav", "mp3"))}}


def chat_file(draw: Draw) -> dict[str, Any]:
    file: dict[str, Any] = {}
    choice = draw(one("data", "raw", "id"))
    if choice == "data":
        file["file_data"] = "data:application/pdf;base64," + draw(B64)
    elif choice == "raw":
        file["file_data"] = draw(B64)
    else:
        file["file_id"] = draw(FILE_ID)
    maybe(draw, "filename", one("a.pdf", "notes.txt"), file)
    return {"type": "file", "file": file}


CHAT_PARTS: dict[Any, Builder] = {
    C.ChatCompletionContentPartTextParam: chat_text,
    C.ChatCompletionContentPartImageParam: chat_image,
    C.ChatCompletionContentPartInputAudioParam: chat_audio,
    c_part.File: chat_file,
}


def chat_refusal_part(draw: Draw) -> dict[str, Any]:
    return {"type": "refusal", "refusal": draw(TEXT)}


CHAT_ASSISTANT_PARTS: dict[Any, Builder] = {
    C.ChatCompletionContentPartTextParam: chat_text,
    C.ChatCompletionContentPartRefusalParam: chat_refusal_part,
}


def _text_content(draw: Draw) -> Any:
    return draw(TEXT) if draw(st.booleans()) else [chat_text(draw) for _ in range(draw(st.integers(1, 2)))]


def chat_developer(draw: Draw) -> dict[str, Any]:
    message = {"role": "developer", "content": _text_content(draw)}
    maybe(draw, "name", TEXT, message)
    return message


def chat_system(draw: Draw) -> dict[str, Any]:
    message = {"role": "system", "content": _text_content(draw)}
    maybe(draw, "name", TEXT, message)
    return message


SYSTEM_MESSAGE = st.sampled_from([chat_developer, chat_system])


def chat_user(draw: Draw) -> dict[str, Any]:
    if draw(st.booleans()):
        content: Any = draw(TEXT)
    else:
        content = [draw(pick(CHAT_PARTS))(draw) for _ in range(draw(st.integers(1, 3)))]
    message = {"role": "user", "content": content}
    maybe(draw, "name", TEXT, message)
    return message


def chat_assistant(draw: Draw) -> dict[str, Any]:
    """An assistant turn without calls: text, parts, audio, refusal, legacy function_call, name."""
    message: dict[str, Any] = {"role": "assistant"}
    form = draw(one("string", "parts", "null", "absent"))
    if form == "string":
        message["content"] = draw(TEXT)
    elif form == "parts":
        message["content"] = [draw(pick(CHAT_ASSISTANT_PARTS))(draw) for _ in range(draw(st.integers(1, 2)))]
    elif form == "null":
        message["content"] = None
    side = draw(one("audio", "refusal", "function_call", "none", "audio_none"))
    if side == "audio" or (form in ("null", "absent") and side == "none"):
        message["audio"] = {"id": "audio_" + draw(ID4)}
    elif side == "refusal":
        message["refusal"] = draw(TEXT)
    elif side == "function_call":
        message["function_call"] = {"name": draw(TEXT), "arguments": arguments(draw)}
    elif side == "audio_none":
        message["audio"] = None
        if form in ("null", "absent"):
            message["refusal"] = draw(TEXT)
    maybe(draw, "name", TEXT, message)
    return message


def chat_function_call(draw: Draw, ids: Ids) -> dict[str, Any]:
    return {"id": ids(), "type": "function", "function": {"name": draw(TEXT), "arguments": arguments(draw)}}


def chat_custom_call(draw: Draw, ids: Ids) -> dict[str, Any]:
    return {"id": ids(), "type": "custom", "custom": {"name": draw(TEXT), "input": draw(st.text(max_size=10))}}


CHAT_CALLS: dict[Any, Callable[[Draw, Ids], dict[str, Any]]] = {
    C.ChatCompletionMessageFunctionToolCallParam: chat_function_call,
    C.ChatCompletionMessageCustomToolCallParam: chat_custom_call,
}


def chat_tool(draw: Draw, call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": _text_content(draw)}


def chat_function_message(draw: Draw) -> dict[str, Any]:
    return {"role": "function", "name": draw(TEXT), "content": draw(st.one_of(TEXT, st.none()))}


CHAT_MESSAGES: dict[Any, str] = {
    C.ChatCompletionDeveloperMessageParam: "chat_developer",
    C.ChatCompletionSystemMessageParam: "chat_system",
    C.ChatCompletionUserMessageParam: "chat_user",
    C.ChatCompletionAssistantMessageParam: "chat_assistant (and a turn with tool_calls)",
    C.ChatCompletionToolMessageParam: "chat_tool",
    C.ChatCompletionFunctionMessageParam: "chat_function_message",
}


@st.composite
def chat_histories(draw: Draw) -> list[dict[str, Any]]:
    """A sendable Chat Completions history using every message, part and call member."""
    ids = Ids()
    out = [draw(SYSTEM_MESSAGE)(draw) for _ in range(draw(st.integers(0, 2)))]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(one("user", "assistant", "calls", "function"))
        if kind == "user":
            out.append(chat_user(draw))
        elif kind == "assistant":
            out.append(chat_assistant(draw))
        elif kind == "function":
            out.append(chat_function_message(draw))
        else:
            calls = [draw(pick(CHAT_CALLS))(draw, ids) for _ in range(draw(st.integers(1, 3)))]
            message: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
            form = draw(one("null", "string", "empty", "absent", "parts"))
            if form == "null":
                message["content"] = None
            elif form == "string":
                message["content"] = draw(TEXT)
            elif form == "empty":
                message["content"] = ""
            elif form == "parts":
                message["content"] = [chat_text(draw)]
            out.append(message)
            for call in draw(st.permutations(calls)):
                out.append(chat_tool(draw, call["id"]))
    return out


# --- OpenAI Responses -------------------------------------------------------------------------


def r_input_text(draw: Draw) -> dict[str, Any]:
    return {"type": "input_text", "text": draw(TEXT)}


def r_input_image(draw: Draw) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_image", "detail": draw(one("auto", "low", "high"))}
    choice = draw(one("url", "data", "id"))
    if choice == "url":
        part["image_url"] = draw(URL)
    elif choice == "data":
        part["image_url"] = "data:image/png;base64," + draw(B64)
    else:
        part["file_id"] = draw(FILE_ID)
    return part


def r_input_file(draw: Draw) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_file"}
    choice = draw(one("data", "id", "url"))
    if choice == "data":
        part["file_data"] = "data:application/pdf;base64," + draw(B64)
    elif choice == "id":
        part["file_id"] = draw(FILE_ID)
    else:
        part["file_url"] = draw(URL)
    maybe(draw, "filename", one("a.pdf", "b.csv"), part)
    return part


RESPONSES_PARTS: dict[Any, Builder] = {
    ResponseInputTextParam: r_input_text,
    ResponseInputImageParam: r_input_image,
    ResponseInputFileParam: r_input_file,
}


def _input_content(draw: Draw) -> list[dict[str, Any]]:
    return [draw(pick(RESPONSES_PARTS))(draw) for _ in range(draw(st.integers(1, 3)))]


def r_easy(draw: Draw, role: str) -> dict[str, Any]:
    item: dict[str, Any] = {"role": role}
    if role in ("system", "developer"):
        item["content"] = draw(TEXT) if draw(st.booleans()) else [r_input_text(draw)]
    else:
        item["content"] = draw(TEXT) if draw(st.booleans()) else _input_content(draw)
    if role == "assistant" and isinstance(item["content"], list):
        item["content"] = [r_input_text(draw)]
    maybe(draw, "type", st.just("message"), item)
    if role == "assistant":
        maybe(draw, "phase", one("commentary", "final_answer"), item)
    return item


def r_message(draw: Draw, role: str) -> dict[str, Any]:
    content = [r_input_text(draw)] if role != "user" else _input_content(draw)
    item = {"type": "message", "role": role, "content": content}
    maybe(draw, "status", one("completed", "incomplete"), item)
    return item


def r_output_message(draw: Draw) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            part: dict[str, Any] = {"type": "output_text", "text": draw(TEXT), "annotations": []}
            if draw(st.booleans()):
                part["annotations"] = [{"type": "url_citation", "start_index": 0, "end_index": 1, "url": "https://e.com", "title": "E"}]
            maybe(draw, "logprobs", st.just([]), part)
        else:
            part = {"type": "refusal", "refusal": draw(TEXT)}
        content.append(part)
    item = {"type": "message", "id": "msg_" + draw(ID4), "role": "assistant", "status": "completed", "content": content}
    maybe(draw, "phase", one("commentary", "final_answer"), item)
    return item


def r_reasoning(draw: Draw) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": "rs_" + draw(ID4),
        "summary": [{"type": "summary_text", "text": draw(TEXT)} for _ in range(draw(st.integers(0, 2)))],
    }
    maybe(draw, "encrypted_content", st.just("gAAAAABo" + "x" * 8), item)
    maybe(draw, "content", st.just([{"type": "reasoning_text", "text": "thinking"}]), item)
    maybe(draw, "status", st.just("completed"), item)
    return item


def _hid(draw: Draw, prefix: str) -> str:
    return prefix + draw(ID4)


HOSTED: dict[Any, Builder] = {
    ResponseFileSearchToolCallParam: lambda d: {"type": "file_search_call", "id": _hid(d, "fs_"), "queries": [d(TEXT)], "status": "completed", "results": [{"file_id": "file-1", "text": "t", "score": 0.5}]},
    ResponseFunctionWebSearchParam: lambda d: {"type": "web_search_call", "id": _hid(d, "ws_"), "status": "completed", "action": {"type": "search", "query": d(TEXT)}},
    RI.ToolSearchCall: lambda d: {"type": "tool_search_call", "arguments": {"query": d(TEXT)}, "id": _hid(d, "ts_"), "execution": "server", "status": "completed"},
    ResponseToolSearchOutputItemParamParam: lambda d: {"type": "tool_search_output", "tools": [], "id": _hid(d, "tso_"), "execution": "server", "status": "completed"},
    RI.AdditionalTools: lambda d: {"type": "additional_tools", "role": "developer", "tools": []},
    ResponseConfigurationUpdateItemParamParam: lambda d: {"type": "configuration_update", "id": _hid(d, "cu_"), "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}}},
    ResponseReasoningItemParam: r_reasoning,
    ResponseCompactionItemParamParam: lambda d: {"type": "compaction", "encrypted_content": "gAAAA" + d(LOWER3)},
    RI.ImageGenerationCall: lambda d: {"type": "image_generation_call", "id": _hid(d, "ig_"), "result": d(B64), "status": "completed"},
    ResponseCodeInterpreterToolCallParam: lambda d: {"type": "code_interpreter_call", "id": _hid(d, "ci_"), "code": "print(1)", "container_id": "cntr_1", "outputs": [{"type": "logs", "logs": "1\n"}], "status": "completed"},
    RI.McpListTools: lambda d: {"type": "mcp_list_tools", "id": _hid(d, "mcpl_"), "server_label": "wiki", "tools": [{"name": "ask", "input_schema": {}}]},
    RI.McpCall: lambda d: {"type": "mcp_call", "id": _hid(d, "mcp_"), "name": "ask", "arguments": "{}", "server_label": "wiki", "output": d(TEXT), "status": "completed"},
    RI.CompactionTrigger: lambda d: {"type": "compaction_trigger"},
    RI.ItemReference: lambda d: {"type": "item_reference", "id": _hid(d, "msg_")} if d(st.booleans()) else {"id": _hid(d, "msg_")},
    RI.Program: lambda d: {"type": "program", "id": _hid(d, "pg_"), "call_id": _hid(d, "pgc_"), "code": "x", "fingerprint": "f"},
    RI.ProgramOutput: lambda d: {"type": "program_output", "id": _hid(d, "pgo_"), "call_id": _hid(d, "pgc_"), "result": "r", "status": "completed"},
}
"""Items the provider ran or keeps itself: carried as parts, never answered."""

RESPONSES_MESSAGES: dict[Any, str] = {
    EasyInputMessageParam: "r_easy",
    RI.Message: "r_message",
    ResponseOutputMessageParam: "r_output_message",
}


def _screenshot(draw: Draw) -> dict[str, Any]:
    output: dict[str, Any] = {"type": "computer_screenshot"}
    choice = draw(one("data", "url", "id"))
    if choice == "data":
        output["image_url"] = "data:image/png;base64," + draw(B64)
    elif choice == "url":
        output["image_url"] = draw(URL)
    else:
        output["file_id"] = draw(FILE_ID)
    return output


def _output_content(draw: Draw) -> Any:
    if draw(st.booleans()):
        return draw(st.text(max_size=10))
    return [{"type": "input_text", "text": draw(TEXT)}, *([r_input_image(draw)] if draw(st.booleans()) else [])]


CallPair = tuple[Callable[[Draw, str], dict[str, Any]], Any, Callable[[Draw, str], dict[str, Any]]]

RESPONSES_CALLS: dict[Any, CallPair] = {
    ResponseFunctionToolCallParam: (
        lambda d, cid: {"type": "function_call", "call_id": cid, "name": d(TEXT), "arguments": arguments(d), **({"id": "fc_" + cid, "status": "completed"} if d(st.booleans()) else {})},
        RI.FunctionCallOutput,
        lambda d, cid: {"type": "function_call_output", "call_id": cid, "output": _output_content(d)},
    ),
    ResponseCustomToolCallParam: (
        lambda d, cid: {"type": "custom_tool_call", "call_id": cid, "name": d(TEXT), "input": d(st.text(max_size=10))},
        ResponseCustomToolCallOutputParam,
        lambda d, cid: {"type": "custom_tool_call_output", "call_id": cid, "output": _output_content(d)},
    ),
    ResponseComputerToolCallParam: (
        lambda d, cid: {"type": "computer_call", "id": "cu_" + cid, "call_id": cid, "action": {"type": "click", "button": "left", "x": 1, "y": 2}, "pending_safety_checks": [], "status": "completed"},
        RI.ComputerCallOutput,
        lambda d, cid: {"type": "computer_call_output", "call_id": cid, "output": _screenshot(d), **({"acknowledged_safety_checks": [{"id": "sc_1"}]} if d(st.booleans()) else {})},
    ),
    RI.LocalShellCall: (
        lambda d, cid: {"type": "local_shell_call", "id": "lsh_" + cid, "call_id": cid, "action": {"type": "exec", "command": ["ls"], "env": {}}, "status": "completed"},
        RI.LocalShellCallOutput,
        lambda d, cid: {"type": "local_shell_call_output", "id": cid, "output": d(st.text(max_size=10)), **({"status": "completed"} if d(st.booleans()) else {})},
    ),
    RI.ShellCall: (
        lambda d, cid: {"type": "shell_call", "call_id": cid, "action": {"commands": ["ls"]}, **({"status": "completed"} if d(st.booleans()) else {})},
        RI.ShellCallOutput,
        lambda d, cid: {"type": "shell_call_output", "call_id": cid, "output": [{"stdout": d(st.text(max_size=6)), "stderr": "", "outcome": {"type": "exit", "exit_code": d(st.integers(0, 2))}}]},
    ),
    RI.ApplyPatchCall: (
        lambda d, cid: {"type": "apply_patch_call", "call_id": cid, "operation": {"type": "delete_file", "path": "a.txt"}, "status": "completed"},
        RI.ApplyPatchCallOutput,
        lambda d, cid: {"type": "apply_patch_call_output", "call_id": cid, "status": d(one("completed", "failed")), **({"output": d(st.text(max_size=6))} if d(st.booleans()) else {})},
    ),
    RI.McpApprovalRequest: (
        lambda d, cid: {"type": "mcp_approval_request", "id": cid, "name": "ask", "server_label": "wiki", "arguments": arguments(d)},
        RI.McpApprovalResponse,
        lambda d, cid: {"type": "mcp_approval_response", "approval_request_id": cid, "approve": d(st.booleans()), **({"reason": d(TEXT)} if d(st.booleans()) else {})},
    ),
}
"""Tool calls (the key) with their output item type and builders."""


@st.composite
def responses_histories(draw: Draw) -> list[dict[str, Any]]:
    """A sendable Responses input list using every item, part and call member."""
    ids = Ids()
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        role = draw(one("system", "developer"))
        out.append(r_easy(draw, role) if draw(st.booleans()) else r_message(draw, role))
    open_turn = False  # the last items are a model turn without calls
    for _ in range(draw(st.integers(0, 5))):
        if open_turn or draw(st.booleans()):
            # a model turn without calls joins the next one (docs/formats.md): keep them apart
            out.append(r_easy(draw, "user") if draw(st.booleans()) else r_message(draw, "user"))
            open_turn = False
            continue
        turn: list[dict[str, Any]] = [draw(pick(HOSTED))(draw) for _ in range(draw(st.integers(0, 2)))]
        if draw(st.booleans()):
            turn.append(r_easy(draw, "assistant") if draw(st.booleans()) else r_output_message(draw))
        pairs = [(draw(pick(RESPONSES_CALLS)), ids()) for _ in range(draw(st.integers(0, 2)))]
        turn.extend(pair[0](draw, cid) for pair, cid in pairs)
        if not turn:
            continue
        out.extend(draw(st.permutations(turn)))
        out.extend(pair[2](draw, cid) for pair, cid in draw(st.permutations(pairs)))
        open_turn = not pairs
    return out


# --- Anthropic ------------------------------------------------------------------------------


def a_text(draw: Draw) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": draw(TEXT)}
    maybe(draw, "cache_control", CACHE, block)
    return block


def a_image(draw: Draw) -> dict[str, Any]:
    choice = draw(one("base64", "url", "file"))
    if choice == "base64":
        source: dict[str, Any] = {"type": "base64", "media_type": draw(one("image/png", "image/jpeg")), "data": draw(B64)}
    elif choice == "url":
        source = {"type": "url", "url": draw(URL)}
    else:
        source = {"type": "file", "file_id": draw(FILE_ID)}
    block = {"type": "image", "source": source}
    maybe(draw, "cache_control", CACHE, block)
    return block


def a_document(draw: Draw) -> dict[str, Any]:
    choice = draw(one("base64", "url", "file", "text", "content"))
    if choice == "base64":
        source: dict[str, Any] = {"type": "base64", "media_type": "application/pdf", "data": draw(B64)}
    elif choice == "url":
        source = {"type": "url", "url": draw(URL)}
    elif choice == "file":
        source = {"type": "file", "file_id": draw(FILE_ID)}
    elif choice == "text":
        source = {"type": "text", "media_type": "text/plain", "data": draw(TEXT)}
    else:
        source = {"type": "content", "content": [{"type": "text", "text": draw(TEXT)}]}
    block: dict[str, Any] = {"type": "document", "source": source}
    maybe(draw, "title", TEXT, block)
    maybe(draw, "context", TEXT, block)
    maybe(draw, "citations", st.just({"enabled": True}), block)
    maybe(draw, "cache_control", CACHE, block)
    return block


def a_search_result(draw: Draw) -> dict[str, Any]:
    return {"type": "search_result", "source": draw(URL), "title": draw(TEXT), "content": [{"type": "text", "text": draw(TEXT)}], "citations": {"enabled": True}}


def a_thinking(draw: Draw) -> dict[str, Any]:
    return {"type": "thinking", "thinking": draw(st.text(max_size=10)), "signature": "Eq" + draw(ALNUM6)}


def a_redacted(draw: Draw) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": "Em" + draw(ALNUM6)}


def _srv(draw: Draw) -> str:
    return "srvtoolu_" + draw(ALNUM5)


SERVER_BLOCKS: dict[Any, Builder] = {
    A.ServerToolUseBlockParam: lambda d: {"type": "server_tool_use", "id": _srv(d), "name": "web_search", "input": {"query": d(TEXT)}},
    A.WebSearchToolResultBlockParam: lambda d: {"type": "web_search_tool_result", "tool_use_id": _srv(d), "content": [{"type": "web_search_result", "url": "https://e.com", "title": "E", "encrypted_content": "Eq1", "page_age": "1 day"}]},
    A.WebFetchToolResultBlockParam: lambda d: {"type": "web_fetch_tool_result", "tool_use_id": _srv(d), "content": {"type": "web_fetch_result", "url": "https://e.com", "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "page"}}}},
    A.CodeExecutionToolResultBlockParam: lambda d: {"type": "code_execution_tool_result", "tool_use_id": _srv(d), "content": {"type": "code_execution_result", "stdout": "1\n", "stderr": "", "return_code": 0, "content": []}},
    A.BashCodeExecutionToolResultBlockParam: lambda d: {"type": "bash_code_execution_tool_result", "tool_use_id": _srv(d), "content": {"type": "bash_code_execution_result", "stdout": "ok", "stderr": "", "return_code": 0, "content": []}},
    A.TextEditorCodeExecutionToolResultBlockParam: lambda d: {"type": "text_editor_code_execution_tool_result", "tool_use_id": _srv(d), "content": {"type": "text_editor_code_execution_view_result", "content": "x", "file_type": "text"}},
    A.ToolSearchToolResultBlockParam: lambda d: {"type": "tool_search_tool_result", "tool_use_id": _srv(d), "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": "t"}]}},
}
"""Server-tool blocks: carried verbatim as provider parts."""

USER_BLOCKS: dict[Any, Builder] = {
    A.TextBlockParam: a_text,
    A.ImageBlockParam: a_image,
    A.DocumentBlockParam: a_document,
    A.SearchResultBlockParam: a_search_result,
    A.ContainerUploadBlockParam: lambda d: {"type": "container_upload", "file_id": d(FILE_ID)},
}
ASSISTANT_BLOCKS: dict[Any, Builder] = {
    A.TextBlockParam: a_text,
    A.ThinkingBlockParam: a_thinking,
    A.RedactedThinkingBlockParam: a_redacted,
    **SERVER_BLOCKS,
}
TOOL_RESULT_CONTENT: dict[Any, Builder] = {
    A.TextBlockParam: a_text,
    A.ImageBlockParam: a_image,
    A.SearchResultBlockParam: a_search_result,
    A.DocumentBlockParam: a_document,
    A.ToolReferenceBlockParam: lambda d: {"type": "tool_reference", "tool_name": d(TEXT)},
    A.BrowserStateBlockParam: lambda d: {"type": "browser_state", "tabs": []},
}
ANTHROPIC_CALL_BLOCKS = (A.ToolUseBlockParam, A.ToolResultBlockParam)
ANTHROPIC_MESSAGES: dict[Any, str] = {
    A.UserMessageParam: "user turns",
    A.AssistantMessageParam: "assistant turns",
    A.SystemMessageParam: "a mid-conversation system message",
}
ANTHROPIC_EXTRA_UNIONS = (a_message, a_tool_result)


def a_tool_result(draw: Draw, call_id: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    form = draw(one("string", "blocks", "absent", "empty"))
    if form == "string":
        block["content"] = draw(TEXT)
    elif form == "blocks":
        block["content"] = [draw(pick(TOOL_RESULT_CONTENT))(draw) for _ in range(draw(st.integers(1, 2)))]
    elif form == "empty":
        block["content"] = ""
    maybe(draw, "is_error", st.booleans(), block)
    maybe(draw, "cache_control", CACHE, block)
    return block


@st.composite
def anthropic_histories(draw: Draw) -> dict[str, Any]:
    """A sendable Anthropic ``{"system"?, "messages"}`` using every block and message member."""
    ids = Ids()
    body: dict[str, Any] = {}
    system = draw(one("none", "string", "blocks"))
    if system == "string":
        body["system"] = draw(TEXT)
    elif system == "blocks":
        body["system"] = [a_text(draw) for _ in range(draw(st.integers(1, 2)))]
    messages: list[dict[str, Any]] = []
    # a mid-conversation system message, where the API takes one: after the first user
    # turn, before an assistant turn (or last)
    mid_system = draw(st.booleans())
    waiting: list[str] = []
    for n in range(draw(st.integers(1, 6))):
        if n % 2 == 0:
            results = [a_tool_result(draw, cid) for cid in draw(st.permutations(waiting))]
            waiting = []
            extra = [draw(pick(USER_BLOCKS))(draw) for _ in range(draw(st.integers(0 if results else 1, 2)))]
            if not results and draw(st.booleans()):
                messages.append({"role": "user", "content": draw(TEXT)})
            else:
                messages.append({"role": "user", "content": results + extra})
            if mid_system:
                messages.append({"role": "system", "content": draw(TEXT) if draw(st.booleans()) else [a_text(draw)]})
                mid_system = False
            continue
        if draw(st.booleans()) and n != 1:
            messages.append({"role": "assistant", "content": draw(TEXT)})
            continue
        blocks = [draw(pick(ASSISTANT_BLOCKS))(draw) for _ in range(draw(st.integers(0, 3)))]
        uses = []
        for _ in range(draw(st.integers(0 if blocks else 1, 2))):
            use = {"type": "tool_use", "id": ids("toolu"), "name": draw(TEXT), "input": draw(ARGS)}
            maybe(draw, "cache_control", CACHE, use)
            uses.append(use)
        thinking = [b for b in blocks if b["type"] in ("thinking", "redacted_thinking")]
        rest = [b for b in blocks if b not in thinking]
        mixed = draw(st.permutations(rest + uses))
        messages.append({"role": "assistant", "content": thinking + list(mixed)})
        waiting = [u["id"] for u in uses]
    if waiting:
        messages.append({"role": "user", "content": [a_tool_result(draw, cid) for cid in waiting]})
    body["messages"] = messages
    return body
