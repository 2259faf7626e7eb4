"""SQLite test databases copied from a database migrated once per process (decision 0142, "SQLite").

A test that wants a fresh, empty store gets a copy of this process's migrated template
(``flowmem.store.sqlite.private.template``, what ``memory://`` copies too): ~1.5 ms,
where running every migration takes ~80 ms. Tests of migrations, upgrades,
``create=False``, a missing or damaged file, or a database's first open keep a bare path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from flowmem.store.sqlite.private import template


def migrated_sqlite_url(path: Path | str) -> str:
    """The URL of a new SQLite database at ``path``: a copy of the process's migrated template.

    Its folder is made as ``open_store`` makes it; a database already there is kept.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        shutil.copyfile(template(), path)
    return f"sqlite:///{path}"
