"""Tests of the PostgreSQL backend's own modules (``flowmem.store.postgres``), mirroring its files."""
