"""The API's fast path: the memory and buffer routes, handled for speed, and nothing else.

What may live here: code whose only reason to exist is the speed of the hot
routes (an append per agent step), each piece next to the oracle test that proves
it answers exactly as the plain way would. Rules (access, scopes, GR-MEM, limits)
do not live here; they are called from here. ``flowmem.api.app`` only wires these
pieces in (``DirectRoute`` as the memory router's route class).

- ``route``: one memory request, read and answered by hand.
  ``DirectRoute`` is a route's handler without FastAPI's per-request solving
  (decision 0007). Oracle: ``tests/api/fast/test_route.py`` sends the same
  requests, fixed and generated, to the app built with FastAPI's own routes;
  every status and body is equal.
  ``memory_call`` reads the target (scope, key, scope ids) by hand (decision
  0006 §4). Oracle: ``tests/api/fast/test_route_target.py`` (a bad field is
  FastAPI's 422, 401 comes first, the OpenAPI document declares what FastAPI
  would have).
  ``ShortCall`` names the memory service's single-transaction operations
  (``Operation``), the only calls allowed on the event loop, and
  ``scope_context`` their execution context. Oracles: the memory route tests
  (``tests/api/test_routes.py``: MEM-6, 7, 8, 13 over HTTP), which run the
  same operations through the same context.
The pool where store calls run (``StorePool``: a ``ShortCall`` on the event loop
when the store has ``LocalCalls``, everything else in threads, group commit's
wait before any answer) is not here: it is its own owner, ``flowmem.api.pool``,
below this package and below the services that hand it out (issue 39 §5), with
its oracles ``tests/api/test_pool.py`` and ``tests/api/fast/test_inline_store.py``.
"""
