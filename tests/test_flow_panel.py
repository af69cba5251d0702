"""The queue page's flow control: the limits in the settings glance, and a panel with what is
in processing against its cap, the bucket's fill, the keys at their cap and what is held back."""

from __future__ import annotations

import re

import pytest

from queues import stores
from tests.test_console import client_for

pytestmark = pytest.mark.django_db
HOST, NAME = "task.example.com", "resize"
URL = f"/console/{HOST}/{NAME}/"


def _text(client) -> str:
    response = client.get(URL)
    assert response.status_code == 200
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def _post(queue, **kw):
    return stores.of(HOST, NAME).post(HOST, NAME, {"n": 1}, settings=queue.to_settings(),
                                      posted_by="alice", **kw).task  # fmt: skip


def _claim(queue):
    return stores.of(HOST, NAME).claim(HOST, NAME, settings=queue.to_settings(), worker="box-1")


@pytest.fixture
def staff():
    return client_for("sam", is_staff=True)


def test_a_queue_without_limits_shows_no_panel(make_queue, staff):
    queue = make_queue(HOST, NAME)
    _post(queue)
    page = _text(staff)
    assert "claim rate no limit" in page and "Flow control" not in page


def test_the_panel_shows_processing_against_its_cap_and_what_it_holds_back(make_queue, staff):
    queue = make_queue(HOST, NAME, max_processing=1, rate_count=50, rate_seconds=1)
    for _ in range(3):
        _post(queue)
    assert len(_claim(queue)) == 1
    page = _text(staff)
    assert "claim rate 50 claims per 1 s" in page
    assert "Flow control · 2 claimable held back by maxProcessing" in page
    assert "processing 1 of 1" in page
    assert re.search(r"bucket [45]\.\d of 5 tokens", page)


def test_the_panel_names_the_keys_at_their_cap(make_queue, staff):
    queue = make_queue(HOST, NAME, max_per_key=1)
    _post(queue, concurrency_key="cust-a")
    _post(queue, concurrency_key="cust-a")
    assert len(_claim(queue)) == 1
    page = _text(staff)
    assert "keys in processing cust-a (1)" in page
    assert "tasks of 1 key(s) at their cap are held back: cust-a" in page
