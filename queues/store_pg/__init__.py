"""The PostgreSQL store: the file store's contract (queues.store.interface.TaskStore) on
PostgreSQL, so several web servers on several machines share queues. Plain Python and
psycopg 3, no Django: the console's router picks it for the queues whose store is postgres.

Where to read: store.py (PostgresStore, every verb) over writes.py (the one place a task
changes, with its event row, archived bodies and NOTIFY), reads.py, sweeping.py, waits.py
(the LISTEN thread), following.py (the live event stream's reader), schema.py (the tables),
rows.py, pool.py.
"""

from .config import PgStoreConfig
from .store import PostgresStore

__all__ = ["PgStoreConfig", "PostgresStore"]
