"""``flowmem reembed``: move a store's LangGraph vectors to a new embedding model (issue 40).

Searches keep answering in the old space until the switch, which is atomic; run it
again after an interruption and it goes on (``flowmem.integrations.langgraph.reembed``).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from flowmem.cli.database import database_option, open_database
from flowmem.errors import ConfigurationError
from flowmem.service import MemoryService


def load_embedder(spec: str) -> Any:
    """``module:attribute`` imported (an Embeddings, a class made with no arguments, a function), else ``provider:model``."""
    module_name, _, attribute = spec.partition(":")
    if "." in module_name or module_name.startswith("_"):  # a module path, not a provider name
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as missing:
            raise ConfigurationError(f"cannot import the embedder {spec!r}: {missing}") from None
        return found() if isinstance(found, type) else found
    return spec  # "openai:text-embedding-3-small": LangChain's init_embeddings makes it


@click.command("reembed")
@click.option("--embed", "embed", required=True, help="The new embedder: provider:model (LangChain's init_embeddings) or package.module:object.")
@click.option("--dims", type=click.IntRange(1, 65536), required=True, help="Its dimensions.")
@click.option("--space", help="The new space's name (default: the embedder's).")
@click.option("--batch", type=click.IntRange(1, 4096), default=64, show_default=True, help="Records per embedder call.")
@database_option
def reembed_command(
    embed: str, dims: int, space: str | None, batch: int, database: str | None
) -> None:
    """Re-embed every FlowmemStore vector of the database with a new model, then switch to it.

    Searches and puts keep running in the old space during the move; the switch is one
    transaction. Afterwards build FlowmemStore with the new index (dims, embed, space).
    """
    from flowmem.integrations.langgraph.reembed import reembed

    store = open_database(database)
    try:
        index: dict[str, Any] = {"dims": dims, "embed": load_embedder(embed)}  # each vector keeps its field
        with click.progressbar(length=0, label="re-embedding", show_pos=True) as bar:

            def progress(done: int, waiting: int) -> None:
                bar.length = max(waiting, done)
                bar.update(done - bar.pos)

            moved = reembed(MemoryService(store), index, space=space, batch=batch, progress=progress)
    finally:
        store.close()
    click.echo(f"moved to {moved.new} from {moved.old}: {moved.records} records re-embedded in {moved.passes} passes")
