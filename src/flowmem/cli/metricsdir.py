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
    """Turn the workers' metrics on or off; when on, give them a new private directory.

    The directory is made for this server (``mkdtemp``: empty, mode 0700), so no
    value of an earlier run or of another server is ever added in, and it is
    removed when the server stops. Its path reaches every worker in
    ``$PROMETHEUS_MULTIPROC_DIR`` (``flowmem.api.metrics``).
    """
    if not enabled:
        os.environ[METRICS_ENV] = "0"
        os.environ.pop(MULTIPROC_ENV, None)
        yield None
        return
    directory = tempfile.mkdtemp(prefix="flowmem-metrics-")
    os.environ[METRICS_ENV] = "1"
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        if os.environ.get(MULTIPROC_ENV) == directory:
            del os.environ[MULTIPROC_ENV]
