"""The sweep preview: what the next sweep would do with other settings, changing nothing; and
the sweep's lapsed-lease lines say so (`lapsed`), as against a worker's own requeue. On both
stores: the PostgreSQL store's preview judges its rows by the same rules."""

from __future__ import annotations

from dataclasses import replace

from queues.store import preview_sweep as preview_files
from queues.store import sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0

SECOND, HOUR = 1000, 3_600_000


def preview_sweep(store, host, queue, settings, *, now):
    if hasattr(store, "preview_sweep"):  # the PostgreSQL store's is a method
        return store.preview_sweep(host, queue, settings, now=now)
    return preview_files(store, host, queue, settings, now=now)


def _everything_on_disk(h):
    if h.kind == "postgres":
        return h.stored()  # every table, every row (the tasks' records and the event rows)
    return {
        p.relative_to(h.queue_dir): p.read_bytes() for p in h.queue_dir.rglob("*") if p.is_file()
    }


def test_the_preview_counts_what_a_sweep_with_the_settings_would_do_and_changes_nothing(h):
    old = h.post(now=T0)
    stuck = h.post(now=T0 + 1)
    h.claim(now=T0 + 2)  # claims `old`
    h.claim(now=T0 + 3)  # claims `stuck`, lease 60 s
    done = h.post(now=T0 + 4)
    h.claim(now=T0 + 5)
    h.store.finish(HOST, QUEUE, done.id, settings=SETTINGS, worker="box-1", attempt=1,
                   result={}, now=T0 + 6)  # fmt: skip
    fresh = h.post(now=T0 + 2 * HOUR)
    before, events = _everything_on_disk(h), h.events()
    now = T0 + 2 * HOUR + 10

    # the settings as they are: leases lapsed (requeue), the finished task's hour is over
    same = preview_sweep(h.store, HOST, QUEUE, SETTINGS, now=now)
    assert same.counts == {"timeout": 0, "requeue": 2, "failed": 0, "cancelled": 0, "cleaned": 1}
    assert sorted(same.samples["requeue"]) == sorted([old.id, stuck.id])
    assert same.samples["cleaned"] == [done.id]
    # a queue timeout of one hour: the two old running tasks time out instead; the fresh one not
    shorter = preview_sweep(h.store, HOST, QUEUE, replace(SETTINGS, queue_seconds=3600), now=now)
    assert shorter.counts["timeout"] == 2 and shorter.counts["requeue"] == 0
    assert fresh.id not in shorter.samples["timeout"] and shorter.total == 3
    # a longer retention keeps the finished task
    longer = preview_sweep(h.store, HOST, QUEUE, replace(SETTINGS, retain_seconds=86400), now=now)
    assert longer.counts["cleaned"] == 0
    assert _everything_on_disk(h) == before and h.events() == events

    # and the sweep itself then does what the preview said
    report = sweep_queue(h.store, HOST, QUEUE, replace(SETTINGS, queue_seconds=3600), now=now)
    assert (report.timeout, report.requeue, report.cleaned) == (2, 0, 1)


def test_the_preview_says_which_lapsed_leases_would_fail_or_be_cancelled(h):
    one = replace(SETTINGS, max_attempts=1)
    spent = h.post(settings=one, now=T0)
    stopped = h.post(now=T0 + 1)
    h.claim(settings=one, now=T0 + 2)
    h.claim(now=T0 + 3)
    h.store.cancel(HOST, QUEUE, stopped.id, settings=SETTINGS, now=T0 + 4)
    preview = preview_sweep(h.store, HOST, QUEUE, SETTINGS, now=T0 + 120 * SECOND)
    assert preview.samples["failed"] == [spent.id] and preview.samples["cancelled"] == [stopped.id]


def test_a_queue_never_posted_to_previews_nothing(h):
    preview = preview_sweep(h.store, HOST, "never", SETTINGS, now=T0)
    assert preview.total == 0
    if h.kind == "files":
        assert not (h.config.items_dir / HOST / "never").exists()


def test_the_sweeps_lapsed_lease_lines_say_lapsed_and_a_workers_requeue_does_not(h):
    lapsed = h.post(now=T0)
    h.claim(now=T0 + 1)
    reported = h.post(now=T0 + 2)
    h.claim(now=T0 + 3)
    h.store.fail(HOST, QUEUE, reported.id, settings=SETTINGS, worker="box-1", attempt=1,
                 retry=True, now=T0 + 4)  # fmt: skip
    sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 120 * SECOND)
    assert h.events(lapsed.id)[-1]["event"] == "requeue" and h.events(lapsed.id)[-1]["lapsed"]
    assert h.events(reported.id)[-1]["event"] == "requeue"
    assert "lapsed" not in h.events(reported.id)[-1]
