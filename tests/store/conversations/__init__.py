"""Tests of the conversations kind of data (``flowmem.store.conversations``), mirroring its package."""
