"""Tests of the vectors kind of data's own modules (``flowmem.store.vectors``), mirroring its files."""
