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


def test_the_chart_has_a_time_axis_its_scale_and_a_value_per_half_hour():
    import xml.etree.ElementTree as ET

    from queues.console.activity import Activity
    from queues.console.charts import activity_chart

    svg = "{http://www.w3.org/2000/svg}"
    day = Activity(start=1_735_689_600, posted=(1,) * 47 + (12,), finished=(0,) * 47 + (5,))
    root = ET.fromstring(str(activity_chart(day, label="resize")))
    # UTC clock times every 8 hours from the window's start, and "now" at its right end.
    ticks = [text.text for text in root.findall(f"./{svg}g[@class='time-axis']/{svg}text")]
    assert ticks == ["00:00", "08:00", "16:00", "now"]
    assert "at most 12 in a half hour" in root.get("aria-label")
    # Hovering a half hour gives its numbers.
    slots = root.findall(f"./{svg}g[@class='slots']/{svg}rect/{svg}title")
    assert (
        len(slots) == 48 and slots[-1].text == "23:30 to 00:00 UTC: 12 posted, 5 finished, 0 failed"
    )
    quiet = ET.fromstring(str(activity_chart(Activity(start=1_735_689_600), label="q")))
    assert quiet.find(f"./{svg}g[@class='time-axis']") is None
