"""Tests of the adk kind of data (``flowmem.store.adk``), mirroring its package."""
