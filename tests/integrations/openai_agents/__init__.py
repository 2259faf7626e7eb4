"""Tests of the OpenAI Agents SDK adapter's modules (``flowmem.integrations.openai_agents``), mirroring its files."""
