"""Which store a queue uses and how the Django side opens them.

`stores.of(host, queue)` is the queue's store (a TaskStore: the file store or the PostgreSQL
store); `stores.router()` is the process's StoreRouter, for what spans both stores.
"""

from queues.stores.opening import close_postgres_stores, of, router, store_config

__all__ = ["close_postgres_stores", "of", "router", "store_config"]
