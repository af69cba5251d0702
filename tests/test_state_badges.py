"""Each task state has a badge of its own colour, with its name in it, readable on its
background: the colours are read from the stylesheet the console serves."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from queues import stores
from queues.store import State

CSS = Path(__file__).resolve().parents[1] / "queues/static/console/console.css"
RULE = re.compile(r"\.task-state-(\w+) \{ color: (#[0-9a-f]{6}); background: (#[0-9a-f]{6});")
AAA = 7.0  # WCAG's enhanced contrast: small badge text must read without effort


def luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def badges() -> dict[str, tuple[str, str]]:
    return {state: (ink, paper) for state, ink, paper in RULE.findall(CSS.read_text())}


def test_every_state_has_its_own_background_and_readable_text() -> None:
    found = badges()
    assert set(found) == {state.value for state in State}
    for state, (ink, paper) in found.items():
        assert contrast(ink, paper) >= AAA, f"{state}: {contrast(ink, paper):.1f}:1"
    for (one, (_, a)), (other, (_, b)) in combinations(found.items(), 2):
        assert a != b, f"{one} and {other} share a background"


def test_the_contrast_check_tells_black_from_grey() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21)
    assert contrast("#777777", "#ffffff") < 4.5


@pytest.mark.django_db
def test_the_queue_and_task_pages_name_the_state_in_its_badge(resize) -> None:
    task = stores.of(resize.host.name, resize.name).post(resize.host.name, resize.name, {"n": 1},
                            settings=resize.to_settings(), posted_by="alice").task  # fmt: skip
    client = Client()
    client.force_login(User.objects.create_user("sam", is_staff=True))
    badge = '<span class="task-state task-state-pending">pending</span>'
    queue_page = client.get(reverse("queues:queue", args=[resize.host.name, resize.name]))
    assert badge in queue_page.content.decode()
    task_page = client.get(reverse("queues:task", args=[resize.host.name, resize.name, task.id]))
    assert badge in task_page.content.decode()
