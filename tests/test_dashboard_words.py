"""The dashboard's headings say what they count, not "done, kept" and "lately"."""

import pytest

from .test_console import client_for

pytestmark = pytest.mark.django_db


def test_the_headings_say_what_they_count(resize):
    page = client_for("sam", is_staff=True).get("/").content.decode()
    head = page[page.index("<thead>") : page.index("</thead>")]
    assert "done, kept" not in head and "lately" not in head
    assert ">ended, still kept</th>" in head and ">last hour</th>" in head
    assert ">finished or failed</th>" in head and ">workers seen in 15 min</th>" in head
