"""Tests of the heads kind of data (``flowmem.store.heads``), mirroring its package."""
