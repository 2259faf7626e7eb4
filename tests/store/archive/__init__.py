"""Tests of the archive kind of data (``flowmem.store.archive``), mirroring its package."""
