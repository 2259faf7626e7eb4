"""The packaging check: every documented extra, installed alone from the built wheel, works.

Not a pytest module: ``python -m tests.packaging`` (``make packaging``, part of
``make test``) builds the sdist and, from it, the wheel; checks the wheel's metadata
and files (``wheel.py``) and that a wheel built straight from the source tree is the
same one (``build.py``); downloads what every extra needs once into a wheelhouse
(``envs.py``); then, two at a time, installs the wheel with one extra (or none) into
a fresh venv and runs what docs/guide.md's table of extras says that extra gives,
and that a command needing another extra names it without a traceback
(``scenarios.py``, run by ``steps.py``; ``serving.py`` for ``flowmem serve``).
``test_scenarios.py`` (in the suite) ties the scenarios to the guide's table.
Decision 0102.
"""
