"""The private directory where ``flowmem serve``'s workers keep their Prometheus values."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from flowmem.api.metrics import METRICS_ENV, MULTIPROC_ENV


@contextmanager
def metrics_directory(enabled: bool) -> Iterator[str | None]:
    """Turn the workers' metrics on or off for the block; when on, give them a new private directory.

    The directory is made for this server (``mkdtemp``: empty, mode 0700), so no
    value of an earlier run or of another server is ever added in, and it is
    removed when the server stops. Its path reaches every worker in
    ``$PROMETHEUS_MULTIPROC_DIR`` (``flowmem.api.metrics``); both variables are
    given back their earlier values at the end.
    """
    before = {name: os.environ.get(name) for name in (METRICS_ENV, MULTIPROC_ENV)}
    directory = tempfile.mkdtemp(prefix="flowmem-metrics-") if enabled else None
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
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
