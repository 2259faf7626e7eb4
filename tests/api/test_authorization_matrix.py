"""The authorization matrix over real HTTP (issue 38 §5): every route × every caller × every resource.

A real ``flowmem serve --workers 2`` on loopback, once over SQLite and once over
PostgreSQL, each request on a new connection (so both workers answer). Every
route of the served OpenAPI document has probes (``matrix_probes.PROBES``; a new
route without one fails ``test_every_route_of_the_openapi_document_has_a_probe``);
every caller kind of ``flowmem.access`` sends each probe at each target (each
owner's session and a missing one, its own ``user`` scope, the shared scope).
Each answer must be the one ``flowmem.access.decide`` calls for: allowed, a 2xx
holding the owner's data; refused, 401/403/404 with its stable code or the neutral
answer naming its refusal. No body holds a secret marker of data the caller may
not read, and after each route's probes the stored data is what it was.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from flowmem.store import open_store
from tests.api.matrix_probes import PROBES, Aim, Probe, aims, disposable, expect
from tests.api.matrix_world import CALLERS, World, make_tokens
from tests.conftest import fresh_schema
from tests.served import flowmem_serve

pytestmark = pytest.mark.slow

MARK = re.compile(r"SECRET-([a-z]+)-[0-9a-f]{10}")
CALLS_AT_ONCE = 4
SERVE = [
    "--workers", "2", "--no-access-log",
    "--rate-limit", "0", "--auth-failures", "0",  # the matrix sends bad tokens on purpose, fast
]  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A ``flowmem serve --workers 2`` over a database filled with every owner's data."""
    base = tmp_path_factory.mktemp(f"matrix-{request.param}")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{base}/matrix.db"
        else:
            url = stack.enter_context(fresh_schema(request.getfixturevalue("postgres_url")))
        store = open_store(url)
        stack.callback(store.close)
        tokens = make_tokens(store)
        served = stack.enter_context(flowmem_serve([*SERVE, "--database", url], base))
        fresh = httpx.Limits(max_keepalive_connections=0)  # each request a new connection: both workers answer
        http = stack.enter_context(httpx.Client(base_url=served.url, timeout=60, limits=fresh))
        world = World(http, store, tokens)
        world.fill()
        yield world


def test_every_route_of_the_openapi_document_has_a_probe(world: World) -> None:
    document = world.http.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    probed = {(probe.method, probe.path) for probe in PROBES}
    assert routes - probed == set(), "a route without a probe: add it to tests/api/matrix_probes.py"
    assert probed - routes == {("GET", "/metrics")}  # served, not documented in OpenAPI


def test_mem_9_mem_15_every_caller_gets_what_access_decide_says_on_every_route_and_refusals_change_nothing(
    world: World,
) -> None:
    failures: list[str] = []
    sent = 0
    before = world.snapshot()
    for probe in sorted(PROBES, key=lambda p: p.writes):  # reads first: they see the data as stored
        jobs = [(caller, aim) for caller in CALLERS for aim in aims(world, probe, caller)]
        with ThreadPoolExecutor(CALLS_AT_ONCE) as pool:
            answers = [pool.submit(probe_once, world, probe, caller, aim) for caller, aim in jobs]
            for answer in answers:
                failures += answer.result()
        sent += len(jobs)
        after = world.snapshot()
        if after != before:
            changed = sorted(k for k in after if after[k] != before.get(k))
            failures.append(f"{probe.label}: the stored data changed ({changed})")
            before = after
    print(f"{sent} probes of {len({(p.method, p.path) for p in PROBES})} routes by {len(CALLERS)} callers")
    assert not failures, f"{len(failures)} of {sent} probes failed:\n" + "\n".join(failures[:40])


def probe_once(world: World, probe: Probe, caller: str, aim: Aim) -> list[str]:
    """Send ``probe`` as ``caller`` at ``aim``; return what is wrong with the answer."""
    want = expect(probe, caller, aim)
    if want.allowed and probe.writes:
        aim = disposable(world, probe, caller, aim)
    method, url, kwargs = probe.build(world, caller, aim)
    answer = world.call(caller, method, url, **kwargs)
    where = f"{probe.label} as {caller} at {aim.scope}:{aim.owner}"
    if answer.status_code != want.status:
        return [f"{where}: {answer.status_code}, want {want.status}: {answer.text[:200]}"]
    body: Any = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else None
    problems = []
    if want.code is not None and (body or {}).get("error", {}).get("code") != want.code:
        problems.append(f"{where}: code {body}, want {want.code}")
    if want.refused is not None and (body or {}).get("refused") != want.refused:
        problems.append(f"{where}: refused {(body or {}).get('refused')!r}, want {want.refused}")
    seen = set(MARK.findall(answer.text))
    readable = want.marks | ({aim.owner} if want.allowed else set())
    if seen - readable:
        problems.append(f"{where}: the body holds the data of {sorted(seen - readable)}")
    if want.marks - seen:
        problems.append(f"{where}: the body misses the data of {sorted(want.marks - seen)}")
    if want.allowed and probe.check is not None:
        wrong = probe.check(world, caller, aim, body)
        if wrong:
            problems.append(f"{where}: {wrong}")
    return problems


def test_the_matrix_world_keeps_each_owners_secret_apart(world: World) -> None:
    """The markers the matrix looks for are there to find: each owner's data holds its own, distinct."""
    marks = {name: world.mark(name) for name in ("alice", "bob", "nobody", "global")}
    assert len(set(marks.values())) == 4 and all(MARK.fullmatch(m) for m in marks.values())
    alice = world.call("alice", "GET", "/v1/buffers/session/chat", params={"session_id": world.sessions["alice"]})
    assert set(MARK.findall(alice.text)) == {"alice"}
