"""The knowledge graph of the reference memory server, kept in flowmem records with owners.

``@modelcontextprotocol/server-memory`` keeps one JSON-lines file that every call
reads whole and writes back whole, so two clients writing at once lose one's write.
Here the graph is the caller's ``user``-scope records under ``PREFIX``, one record per
fact, each at a key made from what it is (``sha256``), so concurrent writers never
write the same record for different facts and a repeated write changes nothing:

- an entity: ``e/<h(name)>`` → ``{name, entityType, at, n}``;
- an observation: ``o/<h(name)>/<h(text)>`` → ``{entity, text, at, n}``;
- a relation: ``r/<h([from, relationType, to])>`` → ``{from, to, relationType, at, n}``.

``at``/``n`` (the clock and the position in the call) keep the order facts were
added in. An entity's observations are written before the entity itself, so an
entity that is read has all of its first observations. Semantics are the reference
server's: creating an existing entity or relation changes nothing and is not in the
answer; observations already there are not added again; adding to an unknown entity
is an error, naming it (nothing of that call is written); deleting what is not there
is no error. Deleting an entity deletes its observations and every relation from or
to it. A call's records are written one at a time (not one transaction): an
interrupted call leaves some of its facts, and its retry writes the rest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flowmem.errors import NotFoundError
from flowmem.mcp.caller import Caller
from flowmem.mcp.records import GRAPH_PREFIX
from flowmem.store.listing import iter_records

PREFIX = GRAPH_PREFIX
ENTITY, OBSERVATION, RELATION = f"{PREFIX}e/", f"{PREFIX}o/", f"{PREFIX}r/"


def digest(value: object) -> str:
    """A key part for ``value``: 32 hex digits of the SHA-256 of its JSON."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def entity_key(name: str) -> str:
    """The record key of the entity ``name``."""
    return ENTITY + digest(name)


def observation_key(name: str, text: str) -> str:
    """The record key of one observation of the entity ``name``."""
    return f"{OBSERVATION}{digest(name)}/{digest(text)}"


def relation_key(relation: dict[str, str]) -> str:
    """The record key of a relation."""
    return RELATION + digest([relation["from"], relation["relationType"], relation["to"]])


@dataclass
class Graph:
    """The graph as read: entities (with observations) and relations, in the order they were added."""

    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The reference server's shape: ``{entities: [{name, entityType, observations}], relations}``."""
        return {"entities": self.entities, "relations": self.relations}

    def around(self, names: set[str]) -> Graph:
        """The entities named, and the relations with at least one end among them (as the reference)."""
        kept = [e for e in self.entities if e["name"] in names]
        found = {e["name"] for e in kept}
        related = [r for r in self.relations if r["from"] in found or r["to"] in found]
        return Graph(kept, related)


def _order(value: dict[str, Any]) -> tuple[float, int]:
    return (float(value.get("at", 0.0)), int(value.get("n", 0)))


class GraphStore:
    """One caller's graph: reads and writes of its records through the memory service."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.memory = caller.services.memory
        self.context = caller.user_context()

    # --- records -----------------------------------------------------------------
    def _get(self, key: str) -> dict[str, Any] | None:
        result = self.memory.read("user", key, self.context)
        return result.value if result.found and isinstance(result.value, dict) else None

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self.memory.write("user", key, value, self.context)

    def _delete(self, key: str) -> None:
        self.memory.delete("user", key, self.context)

    def _records(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        now = float(self.memory.clock())
        for record in iter_records(self.memory.store, "user", self.caller.user, prefix, now=now):
            value = record.value
            if isinstance(value, dict):
                yield record.key, value

    def _stamp(self) -> float:
        return float(self.memory.clock())

    # --- reads -------------------------------------------------------------------
    def read(self) -> Graph:
        """The whole graph (every record under the prefix, read a page at a time)."""
        entities: list[dict[str, Any]] = []
        observations: dict[str, list[dict[str, Any]]] = {}
        relations: list[dict[str, Any]] = []
        for key, value in self._records(PREFIX):
            if key.startswith(ENTITY):
                entities.append(value)
            elif key.startswith(OBSERVATION):
                observations.setdefault(str(value.get("entity")), []).append(value)
            elif key.startswith(RELATION):
                relations.append(value)
        entities.sort(key=_order)
        relations.sort(key=_order)
        shaped = [
            {
                "name": e["name"],
                "entityType": e.get("entityType", ""),
                "observations": [o["text"] for o in sorted(observations.get(e["name"], []), key=_order)],
            }
            for e in entities
        ]
        edges = [{"from": r["from"], "to": r["to"], "relationType": r["relationType"]} for r in relations]
        return Graph(shaped, edges)

    def search(self, query: str) -> Graph:
        """Entities whose name, type or an observation contains ``query`` (any case), and their relations."""
        needle = query.casefold()
        graph = self.read()
        names = {
            e["name"]
            for e in graph.entities
            if needle in e["name"].casefold()
            or needle in e["entityType"].casefold()
            or any(needle in o.casefold() for o in e["observations"])
        }
        return graph.around(names)

    def open(self, names: Iterable[str]) -> Graph:
        """The entities named and the relations touching them."""
        return self.read().around(set(names))

    # --- writes ------------------------------------------------------------------
    def _observations(self, name: str) -> list[str]:
        prefix = f"{OBSERVATION}{digest(name)}/"
        return [v["text"] for _, v in sorted(self._records(prefix), key=lambda kv: _order(kv[1]))]

    def create_entities(self, entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create the entities not there yet (with their observations); return those created."""
        created: list[dict[str, Any]] = []
        seen: set[str] = set()
        at = self._stamp()
        for n, entity in enumerate(entities):
            name = entity["name"]
            if name in seen or self._get(entity_key(name)) is not None:
                continue
            seen.add(name)
            texts = list(dict.fromkeys(entity["observations"]))
            for i, text in enumerate(texts):
                self._put(observation_key(name, text), {"entity": name, "text": text, "at": at, "n": i})
            self._put(entity_key(name), {"name": name, "entityType": entity["entityType"], "at": at, "n": n})
            created.append({"name": name, "entityType": entity["entityType"], "observations": entity["observations"]})
        return created

    def create_relations(self, relations: list[dict[str, str]]) -> list[dict[str, str]]:
        """Create the relations not there yet; return those created."""
        created: list[dict[str, str]] = []
        at = self._stamp()
        for n, relation in enumerate(relations):
            key = relation_key(relation)
            if any(relation_key(r) == key for r in created) or self._get(key) is not None:
                continue
            self._put(key, {**relation, "at": at, "n": n})
            created.append(dict(relation))
        return created

    def add_observations(self, additions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add each entity's new observations; NotFoundError (nothing written) for an unknown entity."""
        for addition in additions:
            if self._get(entity_key(addition["entityName"])) is None:
                raise NotFoundError(
                    f"Entity with name {addition['entityName']} not found: create it first (create_entities)",
                    hinted=True,
                )
        results = []
        at = self._stamp()
        for addition in additions:
            name = addition["entityName"]
            known = set(self._observations(name))
            added: list[str] = []
            for text in addition["contents"]:
                if text in known or text in added:
                    continue
                self._put(observation_key(name, text), {"entity": name, "text": text, "at": at, "n": len(added)})
                added.append(text)
            results.append({"entityName": name, "addedObservations": added})
        return results

    def delete_entities(self, names: list[str]) -> None:
        """Delete the entities, their observations and every relation from or to them."""
        doomed = set(names)
        for key, value in list(self._records(RELATION)):
            if value.get("from") in doomed or value.get("to") in doomed:
                self._delete(key)
        for name in doomed:
            self._delete(entity_key(name))
            for key, _ in list(self._records(f"{OBSERVATION}{digest(name)}/")):
                self._delete(key)

    def delete_observations(self, deletions: list[dict[str, Any]]) -> None:
        """Delete the observations named (those not there are ignored)."""
        for deletion in deletions:
            for text in deletion["observations"]:
                self._delete(observation_key(deletion["entityName"], text))

    def delete_relations(self, relations: list[dict[str, str]]) -> None:
        """Delete the relations named (those not there are ignored)."""
        for relation in relations:
            self._delete(relation_key(relation))
