"""The API's fast path: the memory and buffer routes, handled for speed, and nothing else.

What may live here: code whose only reason to exist is the speed of the hot
routes (an append per agent step), each piece next to the oracle test that proves
it answers exactly as the plain way would. Rules (access, scopes, GR-MEM) do not
live here; they are called from here.

- ``direct``: ``DirectRoute``, a route's handler without FastAPI's per-request
  solving (decision 0007). Oracle: ``tests/api/fast/test_direct.py`` sends the same
  requests to the app built with FastAPI's own routes; every status and body is equal.
- ``call``: ``memory_call`` reads the target (scope, key, scope ids) by hand
  (decision 0006 §4), ``scope_context`` gives its execution context, and
  ``ShortCall`` names the memory service's single-transaction operations, the only
  calls allowed on the event loop. Oracle: ``tests/api/fast/test_call.py`` (a bad
  field is FastAPI's 422, 401 comes first, and the OpenAPI document declares
  what FastAPI would have).
- ``pool``: ``StorePool``, where store calls run: a ``ShortCall`` on the event
  loop when the store has ``LocalCalls``, everything else in threads, and group
  commit's wait before any answer (decisions 0006, 0027). Oracles:
  ``tests/api/fast/test_pool.py`` (loop or thread, ``WouldBlock`` runs again, no
  answer before its fsync) and ``tests/api/fast/test_inline_store.py`` (the same
  requests land exactly once when another writer holds the file).
"""
