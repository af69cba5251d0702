"""Exit 0 when the test PostgreSQL server answers; otherwise say so in one line.

`make test` skips the PostgreSQL run on a machine without a server. With
TASKHOSTER_REQUIRE_POSTGRES=1 (set by .ci/run) an unreachable server fails the run instead.
"""

import os
import sys

import environ
import psycopg

url = os.environ["TASKHOSTER_TEST_DATABASE_URL"]
config = environ.Env.db_url_config(url)
required = os.environ.get("TASKHOSTER_REQUIRE_POSTGRES") == "1"
try:
    psycopg.connect(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname=config["NAME"],
        connect_timeout=3,
    ).close()
except psycopg.OperationalError as exc:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if required:
        print(f"PostgreSQL at {url} is required here and not reachable: {reason}", file=sys.stderr)
        sys.exit(2)
    print(f"skipping the PostgreSQL run: no server at {url} ({reason})")
    sys.exit(1)
