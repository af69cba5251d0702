"""Numbers in the query string: ASCII digits only, and an offset no store could skip is refused
with 400 invalid_request on either store, never a 500."""

from urllib.parse import quote

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)


@pytest.mark.parametrize("offset", [str(2**63), str(2**64), "9" * 4000])
def test_an_offset_past_64_bits_is_refused(world, offset):
    world.post()
    r = world.client("olga").get(f"{TASKS}?offset={offset}")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), r.content
    assert r.json()["detail"].startswith("offset must be an integer from 0 to 9223372036854775807")


def test_the_largest_offset_is_an_empty_page(world):
    world.post()
    r = world.client("olga").get(f"{TASKS}?offset={2**63 - 1}")
    assert r.status_code == 200, r.content
    assert (r.json()["count"], r.json()["results"], r.json()["next"]) == (1, [], None)


def test_a_huge_limit_is_clamped_as_documented(world):
    world.post()
    r = world.client("olga").get(f"{TASKS}?limit={10**30}")
    assert r.status_code == 200 and len(r.json()["results"]) == 1


# int() and float() read these; none is an ASCII number, which is what api.md asks for.
NOT_ASCII_NUMBERS = {
    "Arabic-Indic digits": "\u0661\u0660",
    "a superscript two": "\u00b2",
    "full-width digits": "\uff11\uff10",
    "an underscore": "1_0",
    "spaces": " 10 ",
}


@pytest.mark.parametrize("raw", NOT_ASCII_NUMBERS.values(), ids=NOT_ASCII_NUMBERS.keys())
@pytest.mark.parametrize("name", ["offset", "limit"])
def test_a_list_parameter_that_is_not_ascii_digits_is_refused(world, name, raw):
    r = world.client("olga").get(f"{TASKS}?{name}={quote(raw)}")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), r.content
    assert r.json()["detail"].startswith(f"{name} must be an integer")


@pytest.mark.parametrize("raw", NOT_ASCII_NUMBERS.values(), ids=NOT_ASCII_NUMBERS.keys())
def test_a_post_or_wait_parameter_that_is_not_ascii_digits_is_refused(world, raw):
    before = world.written()
    for name in ("delay", "priority"):
        r = world.client("alice").post(f"{TASKS}?{name}={quote(raw)}", {"n": 1}, format="json")
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), r.content
    assert world.written() == before
    task = world.post()
    r = world.client("alice").get(f"{TASKS}/{task.id}?wait={quote(raw)}")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), r.content


@pytest.mark.parametrize("raw", ["0.5", ".5", "1.", "1e-1", "+0.25"])
def test_a_wait_in_any_usual_spelling_is_taken(world, raw):
    task = world.post()
    r = world.client("alice").get(f"{TASKS}/{task.id}?wait={quote(raw)}&since=1")
    assert r.status_code == 200, r.content
