"""What the browser tests share: the two widths every console page must fit, logging in through
the console's own login page, and the check that a page is no wider than the screen."""

from __future__ import annotations

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def log_in(page, live_server, username: str, password: str, then: str = "/") -> None:
    page.goto(f"{live_server.url}/login/?next={then}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{then}")


def overflow(page) -> tuple[int, int]:
    """The page's width and the screen's, in CSS px."""
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


def assert_fits(page) -> None:
    wide, screen = overflow(page)
    assert wide <= screen, f"{page.url} is {wide} px wide on a {screen} px screen"


def staff_page(browser, live_server, viewport: dict[str, int], then: str = "/"):
    """A page in a new browser context of `viewport`'s size, logged in as the staff user sam
    (made here): the operator most console tests look through."""
    from django.contrib.auth.models import User

    User.objects.create_user("sam", password="a-long-password", is_staff=True)
    page = browser.new_context(viewport=viewport).new_page()
    log_in(page, live_server, "sam", "a-long-password", then)
    return page
