"""flowmem: conversation memory for LLM agents that keeps every history provider-sendable."""

__version__ = "0.1.0"
