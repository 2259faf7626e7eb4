"""Tests of the LangChain adapter's modules (``flowmem.integrations.langchain``), mirroring its files."""
