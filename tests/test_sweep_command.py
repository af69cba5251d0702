import io
import time

import pytest
from django.core.management import CommandError, call_command

from queues.services import get_store

pytestmark = pytest.mark.django_db


def sweep(*args: str) -> str:
    out = io.StringIO()
    call_command("sweep", *args, stdout=out)
    return out.getvalue()


def test_one_sweep_requeues_a_lapsed_lease_and_reports_it(make_queue):
    queue = make_queue(lease_seconds=10)
    store, settings = get_store(), queue.to_settings()
    task = store.post(queue.host.name, queue.name, {"n": 1}, settings=settings,
                      posted_by="alice").task  # fmt: skip
    long_ago = int(time.time() * 1000) - 60_000  # claimed a minute ago with a 10 s lease
    store.claim(queue.host.name, queue.name, settings=settings, worker="box-1", now=long_ago)
    out = sweep()
    assert "requeue=1" in out and "queues=1" in out
    assert store.read(queue.host.name, queue.name, task.id).status == "pending"
    assert "requeue=0" in sweep()


def test_a_queue_the_console_does_not_know_is_left_alone(make_queue, store_dirs):
    queue = make_queue()
    store = get_store()
    for host, name in (("stray.example", "orphan"), (queue.host.name, queue.name)):
        store.post(host, name, {"n": 1}, settings=queue.to_settings(), posted_by=None)
    assert (store_dirs["items"] / "stray.example" / "orphan" / "pending").is_dir()
    assert "queues=1" in sweep()  # only the configured queue was swept


@pytest.mark.parametrize("interval", ["0", "-1", "nan"])
def test_a_bad_interval_is_refused(interval):
    with pytest.raises(CommandError, match="above 0"):
        sweep("--loop", "--interval", interval)
