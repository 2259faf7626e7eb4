"""Tests of the listing kind of data (``flowmem.store.listing``), mirroring its package."""
