"""One module per framework program of the kill matrix; each exposes ``turn`` (``harness.Program``)."""
