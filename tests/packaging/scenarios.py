"""What each install runs: docs/guide.md's table of extras, row by row, as steps in a fresh venv.

``SCENARIOS[extra]`` (``""``: the base install, no extra) is the list of steps run
in a venv holding the wheel with that extra alone. Every scenario also runs
``flowmem --version`` and ``flowmem --help`` (``common``). Where the guide names a
class, the scenario imports it by its documented name and uses it; where it names a
command, the scenario runs it; and each scenario runs a command that needs an extra
it lacks, which must name that extra without a traceback.
``tests/packaging/test_scenarios.py`` checks that every name of a row is in its
scenario.
"""

from __future__ import annotations

from tests.packaging.serving import Serve
from tests.packaging.steps import Run, python

Step = Run | Serve
UNREACHABLE_PG = "postgresql://flowmem@127.0.0.1:9/flowmem"  # nothing listens on port 9


def common(version: str) -> list[Step]:
    """What every install runs: the version and the help, which lists every command."""
    return [
        Run("flowmem --version", ("flowmem", "--version"), says=(f"flowmem, version {version}",)),
        Run("flowmem --help", ("flowmem", "--help"),
            says=("backup", "check", "normalize", "serve", "token", "user")),
        python("flowmem is the venv's", """
            import sys, flowmem
            assert flowmem.__file__.startswith(sys.prefix), flowmem.__file__
        """),
    ]


def needs(extra: str, *argv: str, env: dict[str, str] | None = None) -> Run:
    """A command this install cannot run: it fails naming ``extra``, without a traceback."""
    return Run(f"{' '.join(argv)} names [{extra}]", argv, returncode=None, says=(f"[{extra}]",), env=env or {})


def adapter_package(package: str) -> Run:
    """Each name a package exports in ``__all__`` (if it has one) imports: its package-level names."""
    return python(f"{package}.__all__ imports", f"""
        import importlib
        package = importlib.import_module({package!r})
        for name in getattr(package, "__all__", ()):
            getattr(package, name)
    """)


HISTORY = """
    import json
    json.dump([{"role": "user", "content": "weather in Lisbon?"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "weather"}]},
               {"role": "user", "content": "still there?"}], open("history.json", "w"))
"""

BASE: list[Step] = [
    python("the core rules, MemoryService, MemoryStore and SqliteStore", """
        from flowmem.core import check_sendable
        from flowmem.scope import ExecutionContext
        from flowmem.service import MemoryService
        from flowmem.store import MemoryStore, open_store
        from flowmem.store.sqlite import SqliteStore

        alice = ExecutionContext(user_id="alice", workflow_id="support")
        sqlite = open_store("sqlite:///core.db")
        assert isinstance(sqlite, SqliteStore)
        for store in (MemoryStore(), sqlite):
            service = MemoryService(store)
            service.append("user", "chat_history", [
                {"role": "user", "content": "weather in Lisbon?"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "weather"}]},
            ], alice)
            service.append("user", "chat_history", {"role": "user", "content": "hello?"}, alice)
            history = service.load("user", "chat_history", alice).messages
            assert len(history) == 4 and not check_sendable(history), history
            store.close()
    """),
    Run("flowmem token create", ("flowmem", "token", "create", "--user", "ops", "--database", "sqlite:///cli.db"),
        says=("fm_",)),
    Run("flowmem token list", ("flowmem", "token", "list", "--database", "sqlite:///cli.db"), says=("ops",)),
    python("a history with an unanswered call", HISTORY),
    Run("flowmem check", ("flowmem", "check", "history.json"), returncode=1, says=("unanswered_call",)),
    Run("flowmem normalize", ("flowmem", "normalize", "--to", "anthropic", "history.json"), says=("tool_use",)),
    Run("flowmem backup", ("flowmem", "backup", "copy.db", "--database", "sqlite:///cli.db")),
    Run("flowmem user erase", ("flowmem", "user", "erase", "ops", "--yes", "--database", "sqlite:///cli.db"),
        says=("tokens",)),
    needs("server", "flowmem", "serve"),
    needs("runtime", "flowmem", "chat", "--scripted"),
    needs("runtime", "flowmem", "demo"),
    needs("postgres", "flowmem", "token", "list", "--database", UNREACHABLE_PG),
    needs("mcp", "flowmem", "mcp"),
    # the listing finds a missing extra without importing the command (decision 0187)
    Run("flowmem --help names each missing extra", ("flowmem", "--help"),
        says=tuple(f"(needs pip install '<checkout>[{extra}]')" for extra in ("server", "runtime", "mcp"))),
]

MCP_STDIO = """
    import json, os, sys
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main():
        command = os.path.join(sys.prefix, "bin", "flowmem")
        params = StdioServerParameters(command=command, args=["mcp", "--user", "ana"],
                                       env={"FLOWMEM_DATABASE_URL": "sqlite:///mcp.db"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"remember", "recall", "read_session", "create_entities"} <= names, names
            await session.call_tool("remember", {"key": "color", "value": "teal"})
            found = await session.call_tool("recall", {"query": "TEAL"})
            assert json.loads(found.content[0].text)["memories"] == [{"key": "color", "value": "teal"}]

    anyio.run(main)
"""

RUNTIME: list[Step] = [
    python("the agent runtime: OpenAIChatModel, tools validated by their JSON schema", """
        from flowmem.runtime import Agent, AgentRunner, OpenAIChatModel, ScriptedModel, ToolContext, ToolRegistry

        def add(a: int, b: int) -> int:
            return a + b

        tools = ToolRegistry()
        tools.register("add", add, {"type": "object", "required": ["a", "b"],
                                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})
        context = ToolContext(None, None, "call_1")
        assert tools.call("add", {"a": 1, "b": 2}, context).content == "3"
        assert tools.call("add", {"a": "one"}, context).error  # refused by jsonschema
        OpenAIChatModel("gpt-4o-mini", "http://127.0.0.1:9/v1", "unused")
    """),
    Run("flowmem chat", ("flowmem", "chat", "--scripted", "--database", "sqlite:///chat.db"),
        stdin="remember color = blue\nrecall color\n/quit\n", says=("blue",)),
    Run("flowmem demo", ("flowmem", "demo"), says=("unanswered_call",)),
]

CLIENT_HEALTH = """
    import http.server, json, threading
    from flowmem.client import AsyncClient, Client

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "ok", "version": "0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = Client(f"http://127.0.0.1:{server.server_address[1]}", "fm_unused")
    try:
        assert client.health().status == "ok"
    finally:
        client.close()
    assert AsyncClient
    try:
        import fastapi
    except ImportError:
        pass
    else:
        raise SystemExit("the client extra installed FastAPI")
"""

OTEL = """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from flowmem import metrics
    from flowmem.scope import ExecutionContext
    from flowmem.service import MemoryService
    from flowmem.store import MemoryStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics.enable_tracing(provider.get_tracer("flowmem"))  # what FLOWMEM_OTEL=1 does in the server
    MemoryService(MemoryStore()).append("user", "k", {"role": "user", "content": "hi"}, ExecutionContext(user_id="a"))
    assert [span.name for span in exporter.get_finished_spans()] == ["flowmem.append"]
"""

TIKTOKEN = """
    import tiktoken
    from flowmem.errors import ConfigurationError
    from flowmem.integrations.openai_tokens import tiktoken_counter

    bytes_only = tiktoken.Encoding(name="bytes", pat_str=r"\\S+|\\s+",
                                   mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})
    assert tiktoken_counter(bytes_only)({"role": "user", "content": "hello"}) > 5
    try:
        tiktoken_counter("gpt-4o")  # TIKTOKEN_CACHE_DIR is empty: refused, nothing fetched
    except ConfigurationError as exc:
        assert "not on this machine" in str(exc), exc
    else:
        raise SystemExit("an encoding that is not cached was loaded")
"""

LANGGRAPH = """
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from flowmem.integrations.langgraph.healing import FlowmemHealing
    from flowmem.integrations.langgraph.saver import FlowmemSaver
    from flowmem.integrations.langgraph.store import FlowmemStore

    def answer(state):
        return {"messages": [AIMessage(f"you said {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    with FlowmemSaver.from_conn_string("sqlite:///graph.db") as saver:
        app = graph.compile(checkpointer=saver)  # StateGraph
        config = {"configurable": {"thread_id": "t-1", "user_id": "ana"}}
        app.invoke({"messages": [HumanMessage("hello")]}, config)
        out = app.invoke({"messages": [HumanMessage("again")]}, config)
        assert [m.content for m in out["messages"]][-1] == "you said again", out
    with FlowmemStore.from_conn_string("sqlite:///graph.db") as store:
        store.put(("ana", "prefs"), "color", {"value": "blue"})
        assert store.get(("ana", "prefs"), "color").value == {"value": "blue"}
    FlowmemHealing()  # the MEM-3 healing middleware, for create_agent
    from langchain.agents import create_agent
"""

SCENARIOS: dict[str, list[Step]] = {
    "": BASE,
    "server": [
        Run("flowmem --help lists serve", ("flowmem", "--help"), says=("Serve the HTTP API on uvicorn",)),
        Serve(),
        RUNTIME[0],  # the server extra includes the runtime one (decision 0102); [runtime] runs the rest
        needs("postgres", "flowmem", "serve", "--port", "9", "--database", UNREACHABLE_PG),
    ],
    "client": [
        python("flowmem.client: Client and AsyncClient over httpx, nothing of the server", CLIENT_HEALTH),
        needs("server", "flowmem", "serve"),
    ],
    "postgres": [
        python("PostgresStore", "from flowmem.store.postgres import PostgresStore"),
        Run("a PostgreSQL URL reaches psycopg", ("flowmem", "token", "list", "--database", UNREACHABLE_PG),
            returncode=6, says=("cannot connect to PostgreSQL",)),
        needs("server", "flowmem", "serve"),
    ],
    "runtime": [*RUNTIME, needs("server", "flowmem", "serve")],
    "langgraph": [
        python("FlowmemSaver, FlowmemStore and FlowmemHealing by their documented paths", LANGGRAPH),
        adapter_package("flowmem.integrations.langgraph"),
    ],
    "langchain": [
        python("FlowmemChatMessageHistory", """
            from flowmem.integrations.langchain import FlowmemChatMessageHistory
            from flowmem.service import MemoryService
            from flowmem.store import MemoryStore

            history = FlowmemChatMessageHistory(MemoryService(MemoryStore()), session_id="s-1")
            history.add_user_message("hello")
            assert [m.content for m in history.messages] == ["hello"]
        """),
        adapter_package("flowmem.integrations.langchain"),
    ],
    "openai-agents": [
        python("FlowmemSession", """
            import asyncio
            from flowmem.integrations.openai_agents import FlowmemSession
            from flowmem.service import MemoryService
            from flowmem.store import MemoryStore

            session = FlowmemSession("s-1", MemoryService(MemoryStore()))
            asyncio.run(session.add_items([{"role": "user", "content": "hello"}]))
            assert asyncio.run(session.get_items())[0]["content"] == "hello"
        """),
        adapter_package("flowmem.integrations.openai_agents"),
    ],
    "pydantic-ai": [
        python("FlowmemConversationStore", """
            from pydantic_ai.conversation_store import ConversationStore
            from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
            from flowmem.service import MemoryService
            from flowmem.store import MemoryStore

            assert isinstance(FlowmemConversationStore(MemoryService(MemoryStore())), ConversationStore)
        """),
        adapter_package("flowmem.integrations.pydantic_ai"),
    ],
    "adk": [
        python("FlowmemSessionService", """
            import asyncio
            from google.adk.sessions import BaseSessionService
            from flowmem.integrations.adk import FlowmemSessionService

            async def main():
                async with FlowmemSessionService("sqlite:///adk.db") as sessions:
                    assert isinstance(sessions, BaseSessionService)
                    made = await sessions.create_session(app_name="shop", user_id="ana")
                    got = await sessions.get_session(app_name="shop", user_id="ana", session_id=made.id)
                    assert got.id == made.id

            asyncio.run(main())
        """),
        adapter_package("flowmem.integrations.adk"),
    ],
    "otel": [
        python("OpenTelemetry traces of appends (FLOWMEM_OTEL=1 in the server)", OTEL),
        needs("server", "flowmem", "serve", env={"FLOWMEM_OTEL": "1"}),
    ],
    "tiktoken": [
        python("tiktoken_counter, from tiktoken's cache only", TIKTOKEN, env={"TIKTOKEN_CACHE_DIR": "tiktoken-cache"}),
    ],
    "mcp": [
        python("flowmem mcp over stdio: the mcp SDK's client remembers and recalls", MCP_STDIO),
        needs("server", "flowmem", "serve"),  # /mcp is served by flowmem serve, with [server]
    ],
}
