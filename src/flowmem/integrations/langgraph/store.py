"""``FlowmemStore``: LangGraph's long-term memory (``BaseStore``) over flowmem memory records.

A LangGraph store keeps items ``(namespace, key) → dict`` where a namespace is a tuple
of labels. ``FlowmemStore(memory)`` keeps each item as one flowmem memory record of a
``MemoryService``, on any backend (memory, SQLite, PostgreSQL), with ``get``, ``put``,
``delete``, ``search`` (``filter``, ``limit``, ``offset``), ``list_namespaces``
(``prefix``, ``suffix`` with ``"*"`` wildcards, ``max_depth``, ``limit``, ``offset``) and
TTLs, sync and async (``abatch`` runs the work in a worker thread). Decision 0041 and
docs/langgraph-store.md say why each choice below was made.

**One transaction.** A batch's puts and deletes are written in one transaction
(``flowmem.service.vector_kinds.write_records``): all or none, one commit for a
batch of any size (each put's old value, whose ``created_at`` it keeps, is read first).

**Order.** A store's batches run one at a time in the order made, as LangGraph's async
stores run theirs (``InOrder``, decision 0156): one whose caller was cancelled while it
ran ends before the next starts; one cancelled before its turn is never made.

**Namespaces → scopes.**

- A namespace whose first label is one of ``user_labels`` (default ``("users",)``) is
  a user's: ``("users", "42", "memories")`` is in the ``user`` scope of user ``"42"``,
  so ``flowmem user erase 42`` (``Store.erase_user``) removes it with the rest of that
  user's data. The second label is the user id and must be a usable identity
  (``flowmem.scope.usable_identity``: not ``""``, ``"0"``, ``"None"``, ``"null"``,
  nothing with whitespace …). Otherwise the namespace refuses, as MEM-6 and MEM-7
  say: a read answers nothing (``get`` → None, ``search`` / ``list_namespaces`` → ``[]``),
  a write or delete raises ``ScopeRefusedError``, each logs exactly one WARNING on
  the ``flowmem`` logger, and no store method is called. Ids compare as flowmem's do
  (NFC): two spellings of one id are one user.
- Every other namespace is in the ``global`` scope.
- The user scope is only ever reached through a namespace naming one real user: a
  search or listing whose prefix does not (``()``, a suffix alone, a ``"*"`` first
  label) covers the global scope only; ``("users",)`` or ``("users", "*")`` refuses.
  A store built for a user (``context`` with a ``user_id``) reaches only that user's
  namespaces: another user's raises ``AccessDeniedError`` (decision 0109).

**Record keys.** An item's record key is ``"langgraph:"``, then each label of its
namespace (the user id label left out: it is the scope id) followed by a space, then
one more space, then the item's key: ``("docs", "v1")`` / ``"intro"`` is
``"langgraph:docs v1  intro"``. In a label ``"!"``, the space and the control
characters are escaped as ``"!"`` and one letter (``" "`` → ``"!`"``), so labels may
hold anything LangGraph allows and no two ``(namespace, key)`` pairs share a key. The
encoding keeps order: records in key order are items in ``(namespace, key)`` order,
a namespace prefix is a key prefix, and search and ``list_namespaces`` read ranges
of the records' primary key through ``flowmem.store.listing``. A record key has at most
255 code points (``service.MAX_KEY_LENGTH``): a longer one is refused
(``InvalidInputError``), never cut.

**Values.** The record's value is an envelope ``{"format": "langgraph.store/1",
"value": {…}, "created_at": …, "updated_at": …, "ttl_minutes": …}`` (epoch seconds
of the service's clock); a put keeps ``created_at``. Values come back as their JSON
form (a tuple as a list), as from LangGraph's SQL stores.

**TTL.** ``put(..., ttl=minutes)`` (or ``TTLConfig["default_ttl"]``) writes the
record with a flowmem TTL of ``minutes × 60`` seconds; an expired item is never
read, listed or counted, and ``sweep_ttl`` (or ``flowmem serve``) reclaims its space.
A read with ``refresh_ttl`` (default: ``TTLConfig["refresh_on_read"]``, else True)
moves the expiry of each item it returns to ``now + ttl`` if the item still holds
what was read (``listing.touch_record``).

**Semantic search.** With ``index`` (LangGraph's ``IndexConfig``: ``dims``, ``embed``,
``fields``, ``distance_type``) a put embeds the item's fields and keeps the vectors
with its record (``flowmem.store.vectors``, in a recorded embedding space: ``space``),
and a search with a ``query`` ranks by score (``semantic``, ``searching``). Without
it, a ``query`` is ignored and every ``score`` is None, as ``InMemoryStore`` does.
"""

from __future__ import annotations

from flowmem.integrations import require

require("langgraph.store.base", "langgraph")

import asyncio  # noqa: E402
from collections.abc import Iterable, Iterator, Mapping  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from typing import Any, Generic, TypedDict, TypeVar, Unpack  # noqa: E402

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from flowmem.errors import (  # noqa: E402
    AccessDeniedError,
    ConfigurationError,
    InvalidInputError,
    ScopeRefusedError,
)
from flowmem.integrations.in_order import InOrder  # noqa: E402
from flowmem.integrations.langgraph.envelope import Envelope, timestamp  # noqa: E402
from flowmem.integrations.langgraph.namespaces import (  # noqa: E402
    FORMAT,
    GLOBAL,
    KEY_PREFIX,
    SEPARATOR,
    USER_SCOPE,
    NamespaceError,
    Place,
    after_prefix,
    decode_record_key,
    encode_labels,
    namespace_path,
    prefix_key,
    record_key,
)
from flowmem.integrations.langgraph.ops import (  # noqa: E402
    check_count,
    check_filter,
    check_item_key,
    check_namespace,
    check_ttl_minutes,
    does_match,
    validate_labels,
)
from flowmem.integrations.langgraph.searching import ranked_items, scan_items  # noqa: E402
from flowmem.integrations.langgraph.semantic import COLLECTION, Index  # noqa: E402
from flowmem.limits import Limits  # noqa: E402
from flowmem.scope import ExecutionContext, Refusal, usable_identity  # noqa: E402
from flowmem.service import MAX_KEY_LENGTH, MemoryService, check_record, kinds  # noqa: E402
from flowmem.service.checks import check_context_ids  # noqa: E402
from flowmem.service.vector_kinds import (  # noqa: E402
    Delete,
    Put,
    put_with_vectors,
    records_writer,
    vectors,
    write_records,
)
from flowmem.store import Address, open_store  # noqa: E402
from flowmem.store.listing import successor  # noqa: E402
from flowmem.store.rows import to_json  # noqa: E402

USER_LABELS: tuple[str, ...] = ("users",)
"""The first labels that make a namespace a user's (its second label is the user id)."""
NAMESPACE_BATCH = 32  # keys one page of list_namespaces reads (it skips whole namespaces)


# --- planned operations (validated and resolved before any storage is touched) -------------
ScanOp = TypeVar("ScanOp", SearchOp, ListNamespacesOp)

@dataclass(frozen=True)
class _Get:
    op: GetOp
    place: Place | None  # None: refused
    key: str  # the record key


@dataclass(frozen=True)
class _Under(Generic[ScanOp]):
    """An operation over the records under a key prefix (a search, a namespace listing)."""

    op: ScanOp
    place: Place | None
    prefix: str  # the record key prefix


class _Search(_Under[SearchOp]):
    """A search of the records under the prefix."""


class _List(_Under[ListNamespacesOp]):
    """A listing of the namespaces under the prefix."""


@dataclass(frozen=True)
class _Put:
    op: PutOp
    place: Place
    key: str
    value: dict[str, Any] | None  # None: delete
    ttl: float | None  # minutes
    texts: list[tuple[str, int, str]] = field(default_factory=list)  # (field, ordinal, text) to embed


_Plan = _Get | _Search | _List | _Put


class StoreOptions(TypedDict, total=False):
    """``FlowmemStore``'s keyword options, which ``FlowmemStore.from_conn_string`` passes on."""

    ttl: TTLConfig | None
    user_labels: Iterable[str]
    context: ExecutionContext | None
    index: IndexConfig | None
    space: str | None


class FlowmemStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are flowmem memory records (module docstring).

    ``memory``: the ``MemoryService`` whose store holds the items (its clock stamps
    them and their TTLs, its limits bound a value). ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` and ``refresh_on_read``; expired items are always
    omitted). ``user_labels``: the first labels of a user's namespaces. ``context``:
    the node, pipeline and workflow a refusal's warning names. ``index``: LangGraph's
    ``IndexConfig`` for semantic search; ``space``: the name of its embedding model
    (default: the embedder's; docs/langgraph-store.md, Embedding spaces).
    """

    supports_ttl = True
    writes_in_one_transaction = True
    """The seam: a batch's puts and deletes are one transaction where the store can (False: each its own)."""

    def __init__(
        self,
        memory: MemoryService,
        *,
        ttl: TTLConfig | None = None,
        user_labels: Iterable[str] = USER_LABELS,
        context: ExecutionContext | None = None,
        index: IndexConfig | None = None,
        space: str | None = None,
    ) -> None:
        if not isinstance(memory, MemoryService):
            raise ConfigurationError(
                f"FlowmemStore needs a flowmem.service.MemoryService, got {type(memory).__name__}"
            )
        self.index = None if index is None else Index.of(index, space)
        if self.index is not None:
            vectors(memory)  # ConfigurationError now for a store that keeps no vectors
        labels = (user_labels,) if isinstance(user_labels, str) else tuple(user_labels)
        if not labels or not all(isinstance(label, str) and label for label in labels):
            raise ConfigurationError(f"user_labels must be non-empty strings, got {labels!r}")
        if any("." in label or "\x00" in label for label in labels):
            raise ConfigurationError(f"a namespace label holds no '.' nor NUL, got {labels!r}")
        if context is not None and not isinstance(context, ExecutionContext):
            raise ConfigurationError(f"context must be an ExecutionContext, got {context!r}")
        check_context_ids(context)  # ids the API would refuse (issue 38 §4)
        if ttl is not None:
            default = ttl.get("default_ttl")
            if default is not None:
                check_ttl_minutes(default, ConfigurationError)
        kinds.check_listing(memory)  # ConfigurationError now for a store that cannot list records
        self.memory = memory
        self.ttl_config = ttl
        self.user_labels = frozenset(labels)
        self.context = context if context is not None else ExecutionContext()
        self.index_config = index
        self._calls = InOrder()  # every batch of this store, one at a time in the order made

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, limits: Limits | None = None, **options: Unpack[StoreOptions]
    ) -> Iterator[FlowmemStore]:
        """Open a flowmem store by URL (``sqlite:///app.db``, ``postgresql://…``) and close it on exit.

        ``limits``: the service's; ``options``: the store's, as ``FlowmemStore(memory, …)`` takes them.
        """
        store = open_store(conn_string)
        try:
            yield cls(MemoryService(store, limits=limits), **options)
        finally:
            store.close()

    def setup(self) -> None:
        """Nothing to do: flowmem migrates its database when it opens it (LangGraph's stores need this)."""

    # --- BaseStore --------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations; every one is checked first, and the reads see the store before the writes.

        As ``InMemoryStore``: results in the order of ``ops``, every get, search and
        listing reads before any put or delete of the batch applies, and of several
        puts to one item the last wins. Bad input or a refused write raises before
        anything is read or written. The puts and deletes are one transaction on
        flowmem's stores (memory, SQLite, PostgreSQL: ``writes_in_one_transaction``):
        all or none, one commit however many.
        """
        plans = [self._plan(op) for op in list(ops)]
        results: list[Result] = self._calls.run_here(self._run, plans, self._embed(plans))  # after an abatch
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` with the embedder awaited and the storage work in a worker thread, in the order made."""
        plans = await asyncio.to_thread(lambda: [self._plan(op) for op in list(ops)])
        queries, documents = self._to_embed(plans)
        embedded: dict[str, Any] = {}
        if self.index is not None:
            embedded = await self.index.aembed_documents(documents)
            for query in queries:
                embedded[query] = await self.index.embeddings.aembed_query(query)
        puts = [plan for plan in plans if isinstance(plan, _Put)]
        if not puts:
            results: list[Result] = await self._calls.run(self._run, plans, embedded)
        else:
            results = await self._calls.write(_writing(puts), self._run, plans, embedded)
        return results

    def _to_embed(self, plans: list[_Plan]) -> tuple[list[str], list[str]]:
        """The search queries and the put texts a batch embeds."""
        if self.index is None:
            return [], []
        queries = [p.op.query for p in plans if isinstance(p, _Search) and p.op.query and p.place]
        documents = [text for p in plans if isinstance(p, _Put) for _, _, text in p.texts]
        return list(dict.fromkeys(q for q in queries if isinstance(q, str))), documents

    def _embed(self, plans: list[_Plan]) -> dict[str, Any]:
        """Each text's embedding: the queries' by ``embed_query``, the put texts' in one call."""
        queries, documents = self._to_embed(plans)
        if self.index is None:
            return {}
        embedded: dict[str, Any] = dict(self.index.embed_documents(documents))
        for query in queries:
            embedded[query] = self.index.embeddings.embed_query(query)
        return embedded

    def _run(self, plans: list[_Plan], embedded: dict[str, Any]) -> list[Result]:
        """Run planned operations: reads first, then the puts (the last of one item's wins)."""
        results: list[Result] = []
        puts: dict[Address, _Put] = {}
        for plan in plans:
            if isinstance(plan, _Put):
                puts[Address(plan.place.scope, plan.place.scope_id, plan.key)] = plan
                results.append(None)
            elif isinstance(plan, _Get):
                results.append(self._get(plan))
            elif isinstance(plan, _Search):
                results.append(self._search_ranked(plan, embedded))
            else:
                results.append(self._list_namespaces(plan))
        self._write(list(puts.values()), embedded)
        return results

    def _write(self, puts: list[_Put], embedded: dict[str, Any]) -> None:
        """A batch's puts and deletes in one transaction where the store has a writer of many (else one by one)."""
        writer = records_writer(self.memory) if self.writes_in_one_transaction and puts else None
        if writer is None:  # the plain path: each put its own transaction
            for put in puts:
                self._put(put, embedded)
            return
        writes: list[Put | Delete] = []
        for put in puts:
            place = put.place
            address = Address(place.scope, place.scope_id, put.key)
            if put.value is None:
                writes.append(Delete(address))
                continue
            envelope, seconds = self._envelope(put)
            found = None
            if self.index is not None and put.texts:  # a value given no vectors loses its old ones
                found = self.index.vectors(put.texts, embedded)
            writes.append(Put(address, envelope.stored(), seconds, found))
        space = None if self.index is None else self.index.space
        write_records(self.memory, writer, writes, COLLECTION, space)

    def sweep_ttl(self) -> int:
        """Delete every flowmem record expired by now (the whole store's, as ``flowmem serve`` does); how many."""
        return kinds.purge_expired(self.memory)

    async def asweep_ttl(self) -> int:
        """``sweep_ttl`` in a worker thread."""
        return await asyncio.to_thread(self.sweep_ttl)

    # --- planning -----------------------------------------------------------------------
    def _plan(self, op: object) -> _Plan:
        if isinstance(op, GetOp):
            namespace = check_namespace(op.namespace, "namespace")
            validate_labels(op)
            key = check_item_key(op.key)
            stored_key = self._record_key(namespace, key)
            place = self._place(namespace, "read", f"{namespace_path(namespace)}:{key}")
            return _Get(op, place, stored_key)
        if isinstance(op, PutOp):
            return self._plan_put(op)
        if isinstance(op, SearchOp):
            prefix = check_namespace(op.namespace_prefix, "namespace_prefix")
            validate_labels(op)
            check_count(op.limit, "limit")
            check_count(op.offset, "offset")
            check_filter(op.filter)
            place = self._place(prefix, "search", namespace_path(prefix))
            return _Search(op, place, prefix_key(place, prefix))
        if isinstance(op, ListNamespacesOp):
            return self._plan_list(op)
        raise InvalidInputError(f"unknown operation type: {type(op).__name__}")

    def _plan_put(self, op: PutOp) -> _Put:
        namespace = check_namespace(op.namespace, "namespace")
        validate_labels(op)
        if not namespace:
            raise NamespaceError("a namespace to put an item in has at least one label")
        if namespace[0] == "langgraph":
            raise NamespaceError(f'a namespace\'s first label cannot be "langgraph": {namespace!r}')
        key = check_item_key(op.key)
        value: dict[str, Any] | None = None
        ttl: float | None = None
        if op.value is not None:
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(
                    f"an item's value must be a dict, got {type(op.value).__name__}",
                    argument="value",
                )
            value = dict(op.value)
            strange = [name for name in value if not isinstance(name, str)]
            if strange:
                raise InvalidInputError(
                    f"an item's value has string keys only, got {strange[0]!r}", argument="value"
                )
            if op.ttl is not None:
                ttl = check_ttl_minutes(op.ttl, InvalidInputError)
        stored_key = self._record_key(namespace, key)
        operation = "write" if value is not None else "delete"
        place = self._place(namespace, operation, f"{namespace_path(namespace)}:{key}")
        if place is None:
            raise ScopeRefusedError(
                f"the namespace {namespace!r} names a user but no usable user id (MEM-6): "
                f"nothing was {'stored' if value is not None else 'deleted'}",
                namespace=list(namespace),
                rule="MEM-6",
            )
        if value is not None:  # what the store will be asked to write, checked before any write
            now = float(self.memory.clock())
            check_record(Envelope(value, now, now, ttl).stored(), self.memory.limits.record_bytes)
        texts = [] if value is None or self.index is None else self.index.texts(value, op.index)
        return _Put(op, place, stored_key, value, ttl, texts)

    def _plan_list(self, op: ListNamespacesOp) -> _List:
        conditions = op.match_conditions or ()
        if not isinstance(conditions, tuple | list):
            raise InvalidInputError("match_conditions must be a tuple of MatchCondition")
        prefix: tuple[str, ...] = ()
        for condition in conditions:
            if not isinstance(condition, MatchCondition):
                raise InvalidInputError(f"not a MatchCondition: {condition!r}")
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidInputError(f"unsupported match type {condition.match_type!r}")
            path = check_namespace(condition.path, f"the {condition.match_type}")
            if condition.match_type == "prefix" and len(path) > len(prefix):
                prefix = path  # the longest prefix narrows the scan most (all must match anyway)
        validate_labels(op)
        check_count(op.limit, "limit")
        check_count(op.offset, "offset")
        if op.max_depth is not None and (
            isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int) or op.max_depth < 1
        ):
            raise InvalidInputError(
                f"max_depth must be None or an integer >= 1, got {op.max_depth!r}"
            )
        fixed = prefix[: prefix.index("*")] if "*" in prefix else prefix
        if prefix and prefix[0] in self.user_labels and len(fixed) < 2:
            # a wildcard (or nothing) where the user id goes names no one user: MEM-6
            place = self._place(prefix[:1], "list_namespaces", namespace_path(prefix))
        else:
            place = self._place(fixed, "list_namespaces", namespace_path(prefix))
        return _List(op, place, prefix_key(place, fixed))

    def _place(self, namespace: tuple[str, ...], operation: str, what: str) -> Place | None:
        """The namespace's place, or None when its user scope refuses (one WARNING logged: MEM-7)."""
        if not namespace or namespace[0] not in self.user_labels:
            return GLOBAL
        label = namespace[1] if len(namespace) > 1 else None
        context = replace(self.context, user_id=label)
        resolved = self.memory.resolve(operation, USER_SCOPE, what, context)
        if isinstance(resolved, Refusal):
            return None
        owner = usable_identity(self.context.user_id)
        if owner is not None and owner != resolved:  # a store built for one user (decision 0109)
            raise AccessDeniedError(
                f"FlowmemStore {operation} refused: {namespace[:2]!r} is user {resolved!r}'s, this "
                f"store is user {owner!r}'s (its context); nothing was read or changed", rule="MEM-9"
            )
        return Place(USER_SCOPE, resolved, label)

    def _stored(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        """The labels of a namespace kept in its record keys: all but a user's id label."""
        if len(namespace) >= 2 and namespace[0] in self.user_labels:
            return (namespace[0], *namespace[2:])
        return namespace

    def _record_key(self, namespace: tuple[str, ...], key: str) -> str:
        """The record key of an item (InvalidInputError when it would pass 255 code points)."""
        stored = record_key(self._stored(namespace), key)
        if len(stored) > MAX_KEY_LENGTH:
            raise InvalidInputError(
                f"namespace {namespace!r} and key {key[:40]!r} need a flowmem record key of "
                f"{len(stored)} characters, over the {MAX_KEY_LENGTH} flowmem keeps "
                "(docs/langgraph-store.md, Keys): use shorter labels or keys",
                argument="key",
            )
        return stored

    # --- running ------------------------------------------------------------------------
    def _now(self) -> float:
        return float(self.memory.clock())

    def _get(self, plan: _Get) -> Item | None:
        place = plan.place
        if place is None:
            return None
        read = self.memory.read_raw(place.scope, place.scope_id, plan.key)
        envelope = Envelope.of(read.value) if read.found else None
        if envelope is None:
            return None
        if plan.op.refresh_ttl and envelope.ttl is not None:
            self._refresh(place, plan.key, to_json(read.value), envelope.ttl)
        return Item(
            value=envelope.value,
            key=plan.op.key,
            namespace=tuple(plan.op.namespace),
            created_at=timestamp(envelope.created_at),
            updated_at=timestamp(envelope.updated_at),
        )

    def _refresh(self, place: Place, key: str, text: str, ttl: float) -> None:
        now = self._now()
        kinds.touch_record_raw(
            self.memory, place.scope, place.scope_id, key, text, now + ttl * 60, now
        )

    def _search_ranked(self, plan: _Search, embedded: dict[str, Any]) -> list[SearchItem]:
        """A search: by score when it has a query and the store an index (then unscored items), else in key order."""
        op, place = plan.op, plan.place
        if place is None or op.limit == 0:
            return []
        if self.index is None or not op.query:
            found = scan_items(self.memory, place, plan.prefix, op, set(), op.offset, op.limit)
        else:
            found = ranked_items(self.memory, self.index, place, plan.prefix, op, embedded[op.query])
        if op.refresh_ttl:  # a read refreshes the TTL of what it returns (decision 0041)
            for _, record in found:
                ttl = Envelope.of(record.value)
                if ttl is not None and ttl.ttl is not None and record.text is not None:
                    self._refresh(place, record.key, record.text, ttl.ttl)
        return [item for item, _ in found]

    def _list_namespaces(self, plan: _List) -> list[tuple[str, ...]]:
        op, place = plan.op, plan.place
        if place is None or op.limit == 0:
            return []
        conditions = tuple(op.match_conditions or ())
        listed: list[tuple[str, ...]] = []
        skipped = 0
        last: tuple[str, ...] | None = None
        start = plan.prefix
        now = self._now()
        while True:
            page = kinds.list_records_raw(
                self.memory,
                place.scope,
                place.scope_id,
                plan.prefix,
                now=now,
                start=start,
                limit=NAMESPACE_BATCH,
                values=False,
            )
            for record in page:
                if record.key < start:
                    continue  # passed over by a jump made earlier in this page
                decoded = decode_record_key(record.key)
                if decoded is None:
                    start = successor(record.key)
                    continue
                labels = decoded[0]
                namespace = place.namespace(labels)
                if not all(does_match(condition, namespace) for condition in conditions):
                    # past this namespace's own items: its children may still match
                    start = after_prefix(encode_labels(labels) + SEPARATOR)
                    continue
                truncated = op.max_depth is not None and len(namespace) >= op.max_depth
                shown = namespace[: op.max_depth] if truncated else namespace
                if shown != last:
                    last = shown
                    if skipped < op.offset:
                        skipped += 1
                    else:
                        listed.append(shown)
                        if len(listed) == op.limit:
                            return listed
                if truncated:  # every namespace under ``shown`` shows as ``shown`` again
                    start = after_prefix(encode_labels(place.stored(shown)))
                else:
                    start = after_prefix(encode_labels(labels) + SEPARATOR)
            if len(page) < NAMESPACE_BATCH:
                return listed
            start = max(start, successor(page[-1].key))

    def _envelope(self, plan: _Put) -> tuple[Envelope, float | None]:
        """What a put of a value stores (its item's ``created_at`` kept) and its TTL in seconds."""
        assert plan.value is not None  # a put of a value, not a delete
        place = plan.place
        old = self.memory.read_raw(place.scope, place.scope_id, plan.key)
        before = Envelope.of(old.value) if old.found else None
        now = self._now()
        created = before.created_at if before is not None else now
        seconds = None if plan.ttl is None else plan.ttl * 60
        return Envelope(plan.value, created, now, plan.ttl), seconds

    def _put(self, plan: _Put, embedded: dict[str, Any]) -> None:
        place = plan.place
        if plan.value is None:
            self.memory.delete_raw(place.scope, place.scope_id, plan.key)
            return
        envelope, seconds = self._envelope(plan)
        if self.index is None or not plan.texts:  # a value given no vectors loses its old ones
            self.memory.write_raw(place.scope, place.scope_id, plan.key, envelope.stored(), seconds)
            return
        found = self.index.vectors(plan.texts, embedded)
        address = Address(place.scope, place.scope_id, plan.key)
        put_with_vectors(
            self.memory, address, envelope.stored(), seconds, COLLECTION, self.index.space, found
        )


def _writing(puts: list[_Put]) -> str:
    """What a batch's writes carry, for the log when they fail with no caller left to tell."""
    named = [
        f"{'put' if put.value is not None else 'delete'} {tuple(put.op.namespace)!r} {put.op.key!r}"
        for put in puts[:5]
    ]
    more = f" and {len(puts) - 5} more" if len(puts) > 5 else ""
    return f"LangGraph FlowmemStore.abatch ({', '.join(named)}{more})"


__all__ = [
    "FORMAT",
    "KEY_PREFIX",
    "USER_LABELS",
    "FlowmemStore",
    "NamespaceError",
    "Place",
    "decode_record_key",
    "encode_labels",
    "record_key",
]
