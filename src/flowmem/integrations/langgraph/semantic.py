"""``FlowmemStore``'s semantic search: LangGraph's ``IndexConfig`` over ``flowmem.store.vectors``.

``Index.of(config)`` reads ``dims``, ``embed`` (a LangChain ``Embeddings``, a sync or
async function, or ``"provider:model"``: LangGraph's ``ensure_embeddings``), ``fields``
(JSON paths, default ``["$"]``: LangGraph's ``tokenize_path`` / ``get_text_at_path``)
``distance_type`` (``cosine``, ``inner_product``, ``l2``) and ``ann_index_config``
(an HNSW index where the store has pgvector: ``pgvector.AnnIndex``). Its embedding space is
named by the caller (``space=``) or after the embedder (``space_name``), with ``dims``.

A put embeds each text at the item's fields (the put's ``index`` list instead, or
none for ``index=False``): a path that yields several texts gives one vector each.
``rank`` has the store's engine score them (pgvector) or else scans the vectors of
one scope id under a key prefix, and keeps the best ``offset + limit`` items (max
over an item's vectors); the caller turns them into
``SearchItem``\\ s and fills the page with unscored items when they run out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from flowmem.errors import ConfigurationError, InvalidInputError
from flowmem.service import MemoryService
from flowmem.service.vector_kinds import nearest_raw, scan_raw
from flowmem.store.listing import successor
from flowmem.store.vectors import Search, Space, Vector, check_space, pack
from flowmem.store.vectors.pgvector import AnnIndex

COLLECTION = "langgraph"
"""The vectors' collection of every ``FlowmemStore``: one embedding space per flowmem store."""
DISTANCES = ("cosine", "inner_product", "l2")
SMALL = 4096  # scored keys remembered for the unscored fill while there are at most this many


def space_name(embed: object) -> str:
    """The space name of an embedder: its ``"provider:model"``, class and model, or function name."""
    if isinstance(embed, str):
        return embed
    kind = type(embed)
    if callable(embed) and not isinstance(embed, Embeddings):
        kind = embed  # type: ignore[assignment]
    name = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__class__.__name__)}"
    for attribute in ("model", "model_name", "model_id"):
        model = getattr(embed, attribute, None)
        if isinstance(model, str) and model:
            return f"{name}:{model}"
    return name


@dataclass(frozen=True)
class Index:
    """A ``FlowmemStore``'s index: its embedder, space, default fields and distance."""

    embeddings: Embeddings
    space: Space
    fields: tuple[tuple[str, Any], ...]  # (path, its tokens, or "$")
    distance: str
    ann: AnnIndex | None = None  # an HNSW index where the store has pgvector (ann_index_config)

    @classmethod
    def of(cls, config: Mapping[str, Any], space: str | None = None) -> Index:
        """The index of LangGraph's ``IndexConfig`` (ConfigurationError for a bad one)."""
        if not isinstance(config, Mapping):
            raise ConfigurationError(f"index must be a LangGraph IndexConfig dict, got {config!r}")
        unknown = set(config) - {"dims", "embed", "fields", "distance_type", "ann_index_config"}
        if unknown:
            raise ConfigurationError(f"index has unknown keys {sorted(unknown)!r}")
        if "embed" not in config or config["embed"] is None:
            raise ConfigurationError("index needs 'embed': an Embeddings, a function or 'provider:model'")
        dims = config.get("dims")
        fields = config.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise ConfigurationError(f"index 'fields' must be a list of JSON paths, got {fields!r}")
        distance = config.get("distance_type", "cosine")
        if distance not in DISTANCES:
            raise ConfigurationError(f"distance_type must be one of {DISTANCES}, got {distance!r}")
        if space is not None and not isinstance(space, str):
            raise ConfigurationError(f"space must be a string naming the embedding model, got {space!r}")
        try:
            named = check_space(Space(space if space is not None else space_name(config["embed"]), dims))  # type: ignore[arg-type]
        except InvalidInputError as bad:
            raise ConfigurationError(f"index: {bad.message}") from None
        return cls(
            ensure_embeddings(config["embed"]),
            named,
            tuple((path, "$" if path == "$" else tokenize_path(path)) for path in fields),
            str(distance),
            AnnIndex.of(config.get("ann_index_config")),
        )

    def texts(self, value: Mapping[str, Any], index: Sequence[str] | bool | None) -> list[tuple[str, int, str]]:
        """The (field, ordinal, text) an item's value is embedded at (``index``: the put's own)."""
        if index is False:
            return []
        if index is None or index is True:
            paths = self.fields
        else:
            if isinstance(index, str) or not all(isinstance(p, str) and p for p in index):
                raise InvalidInputError(f"a put's index must be False or a list of JSON paths, got {index!r}")
            paths = tuple((path, "$" if path == "$" else tokenize_path(path)) for path in index)
        found: list[tuple[str, int, str]] = []
        for path, tokens in paths:
            for ordinal, text in enumerate(get_text_at_path(value, tokens)):
                found.append((path, ordinal, text))
        return found

    def vectors(self, texts: Sequence[tuple[str, int, str]], embedded: Mapping[str, Sequence[float]]) -> list[Vector]:
        """The vectors of an item's texts, from their embeddings (EmbeddingSpaceError for another size)."""
        return [Vector(field, ordinal, pack(embedded[text], self.space)) for field, ordinal, text in texts]

    def embed_documents(self, texts: Sequence[str]) -> dict[str, Sequence[float]]:
        """Each distinct text's embedding (one call)."""
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, self._checked(self.embeddings.embed_documents(unique), unique), strict=True)) if unique else {}

    async def aembed_documents(self, texts: Sequence[str]) -> dict[str, Sequence[float]]:
        """``embed_documents``, awaited."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        found = await self.embeddings.aembed_documents(unique)
        return dict(zip(unique, self._checked(found, unique), strict=True))

    @staticmethod
    def _checked(found: Sequence[Sequence[float]], texts: Sequence[str]) -> Sequence[Sequence[float]]:
        if len(found) != len(texts):
            raise InvalidInputError(f"the embedder returned {len(found)} embeddings for {len(texts)} texts")
        return found


def rank(
    memory: MemoryService,
    index: Index,
    scope: str,
    scope_id: str,
    prefix: str,
    query: Sequence[float],
    *,
    now: float,
    keep: int,
    accept: Callable[[str, str | None], bool] | None,
) -> tuple[list[tuple[str, float, str | None]], int, set[str] | None]:
    """The best ``keep`` items under ``prefix`` by score (key, score, value text), how many were scored, their keys when few.

    ``accept(key, value_text)`` drops an item (a filter; a record that is not an item).
    The scan reads the values with the vectors: the items kept need no second read.
    """
    search = Search(scope, scope_id, prefix, now, COLLECTION, index.space)
    scored = nearest_raw(
        memory, search, query=query, distance=index.distance, keep=keep, accept=accept, ann=index.ann
    )
    if scored is not None:  # the store's engine scored them (pgvector)
        best, fed = scored
        return best, fed, {key for key, _, _ in best} if fed < keep else None
    from flowmem.store.vectors.scoring import Ranking

    ranking = Ranking(query, index.distance, keep)
    seen: set[str] | None = set()
    start = prefix
    verdicts: dict[str, bool] = {}
    while True:
        page, more = scan_raw(memory, search, start=start, values=True)
        if not page:
            break
        keys: list[str] = []
        blobs: list[bytes] = []
        texts: list[str | None] = []
        for row in page:
            if accept is not None:
                verdict = verdicts.get(row.key)
                if verdict is None:
                    verdicts = {row.key: accept(row.key, row.text)}  # the last record's only
                    verdict = verdicts[row.key]
                if not verdict:
                    continue
            keys.append(row.key)
            blobs.append(row.data)
            texts.append(row.text)
        ranking.feed(keys, blobs, texts)
        if seen is not None:
            seen.update(keys)
            if len(seen) > max(SMALL, keep):
                seen = None
        if not more:
            break
        start = successor(page[-1].key)
    return ranking.best(), ranking.fed, seen
