"""The private directory where ``flowmem serve``'s workers keep their Prometheus values."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress

try:
    import fcntl
except ImportError:  # not POSIX: no owner lock, a killed server's directory stays behind
    fcntl = None  # type: ignore[assignment]

from flowmem.api.metrics import METRICS_ENV, MULTIPROC_ENV

PREFIX = "flowmem-metrics-"
OWNER = ".owner"
"""Beside each directory, ``<directory>.owner``: a file its server holds locked while it runs."""


@contextmanager
def metrics_directory(enabled: bool) -> Iterator[str | None]:
    """Turn the workers' metrics on or off for the block; when on, give them a new private directory.

    The directory is made for this server (``mkdtemp``: empty, mode 0700), so no
    value of an earlier run or of another server is ever added in, and it is
    removed when the server stops. Its path reaches every worker in
    ``$PROMETHEUS_MULTIPROC_DIR`` (``flowmem.api.metrics``); both variables are
    given back their earlier values at the end. A server killed before it could
    remove its directory leaves it behind; the next server started by the same user
    removes those whose owner lock is free (:func:`remove_abandoned`).
    """
    before = {name: os.environ.get(name) for name in (METRICS_ENV, MULTIPROC_ENV)}
    directory, owner = None, None
    if enabled:
        remove_abandoned(tempfile.gettempdir())
        directory = tempfile.mkdtemp(prefix=PREFIX)
        owner = _hold(directory)
    os.environ[METRICS_ENV] = "1" if enabled else "0"
    if directory is None:
        os.environ.pop(MULTIPROC_ENV, None)
    else:
        os.environ[MULTIPROC_ENV] = directory
    try:
        yield directory
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
            with suppress(OSError):
                os.unlink(directory + OWNER)
        if owner is not None:
            os.close(owner)
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _hold(directory: str) -> int | None:
    """Lock ``<directory>.owner`` for as long as this process lives (None where there is no flock).

    The file is locked under another name first and then renamed, so a server
    sweeping at the same moment never finds it unlocked.
    """
    if fcntl is None:
        return None
    pending = directory + OWNER + ".new"
    fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(pending, directory + OWNER)
    return fd


def remove_abandoned(parent: str) -> list[str]:
    """Remove this user's metrics directories in ``parent`` whose server is gone; the removed paths.

    A directory is abandoned when its owner file can be locked: the lock of a
    server that still runs (SIGKILL included, the kernel releases it at exit) is
    held. Directories without an owner file (being made, or from an older flowmem),
    another user's, and links are left alone.
    """
    if fcntl is None:
        return []
    removed = []
    with os.scandir(parent) as entries:
        owners = [
            entry.path
            for entry in entries
            if entry.name.startswith(PREFIX)
            and entry.name.endswith(OWNER)
            and entry.is_file(follow_symlinks=False)
            and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        ]
    for owner in owners:
        try:
            fd = os.open(owner, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue  # removed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its server runs
        try:
            directory = owner[: -len(OWNER)]
            if os.path.isdir(directory) and not os.path.islink(directory):
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
            with suppress(OSError):
                os.unlink(owner)
        finally:
            os.close(fd)
    return removed
