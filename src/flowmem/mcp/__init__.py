"""``flowmem mcp``: flowmem's memory and sessions as a Model Context Protocol server (issue 41).

Tools for memory records (``records``), past sessions (``sessions``), the reference
memory server's knowledge graph (``graph``), and sessions as resources
(``resources``), over stdio (``stdio``: ``flowmem mcp``) or streamable HTTP in
``flowmem serve`` (``http``: ``/mcp``, under the REST API's tokens). Needs the ``mcp``
extra (``pip install 'flowmem[mcp]'``). docs/mcp.md.
"""
