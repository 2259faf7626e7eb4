"""Imported last by the fork server: every object its preloaded modules made is frozen (``gc.freeze``).

A forked child's collections then never traverse the frameworks' modules it inherited
(hundreds of thousands of objects: a full collection of them costs a child ~0.1 s), nor
write their collector headers, which would copy the pages holding them (copy on write).
What the children run is unchanged: frozen objects are only kept out of collections,
and those inherited modules live as long as the child anyway (decision 0188).
"""

from __future__ import annotations

import gc

gc.collect()  # the imports' garbage first: nothing collectable is frozen
gc.freeze()
