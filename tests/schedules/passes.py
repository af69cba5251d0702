"""Run as a process: `python -m tests.schedules.passes START COUNT GO_FILE` runs the schedules
pass once for each of COUNT minutes from START (unix seconds), after GO_FILE appears, so that
two such processes race on the same due times."""

import datetime as dt
import os
import sys
import time

import django


def main() -> None:
    start, count, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskhoster_site.settings")
    django.setup()
    from queues import stores
    from schedules.running import post_due_schedules

    store = stores.router()
    while not os.path.exists(go):  # both processes start their passes together
        time.sleep(0.01)
    posted = 0
    for minute in range(count):
        now = dt.datetime.fromtimestamp(start + 60 * minute, dt.UTC)
        posted += post_due_schedules(store.of, now=now).posted
    print(posted)


if __name__ == "__main__":
    main()
