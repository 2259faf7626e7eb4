"""Tests of the SQLite backend's own modules (``flowmem.store.sqlite``), mirroring its files."""
