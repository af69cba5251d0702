"""/favicon.ico answers (browsers ask for it on every page that names no icon: the admin's)."""

from django.test import Client


def test_favicon_ico_leads_to_the_console_icon():
    client = Client()
    moved = client.get("/favicon.ico")
    assert moved.status_code == 301 and moved["Location"] == "/static/console/favicon.svg"
    icon = client.get(moved["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)
