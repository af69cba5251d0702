"""Control characters (C0, DEL, C1), and the other code points the one rule for names refuses
(format characters such as a bidi override or U+FEFF, separators, spaces but U+0020), in a
request's name-like fields are refused naming the field, before anything is written; inside
free JSON (item, progress, result) they are kept as sent."""

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)
# NUL (PostgreSQL refuses it in text), a newline and ESC (forged log and terminal lines), DEL,
# and C1's NEL and CSI.
CONTROLS = {"NUL": "\x00", "newline": "\n", "ESC": "\x1b", "DEL": "\x7f", "NEL": "\x85",
            "CSI": "\x9b"}  # fmt: skip
# A bidi override (reorders what the console shows after it), a byte order mark and a
# zero-width space (invisible), a no-break space (reads as a space, compares as another name).
UNPRINTABLE = {**CONTROLS, "RLO": "\u202e", "BOM": "\ufeff", "ZWSP": "\u200b", "NBSP": "\u00a0"}


def _worker_bodies(task_id: str, bad: str) -> list[tuple[str, dict, str]]:
    """(path, body, the field the refusal must name) for every request that takes a name."""
    worker = f"box{bad}1"
    fenced = {"worker": worker, "attempt": 1}
    return [
        (url(HOST, QUEUE, "claim"), {"worker": worker}, "worker"),
        (f"{TASKS}/{task_id}/progress", {**fenced, "progress": {"p": 1}}, "worker"),
        (f"{TASKS}/{task_id}/result", {**fenced, "result": {"r": 1}}, "worker"),
        (f"{TASKS}/{task_id}/fail", {**fenced, "retry": True}, "worker"),
        (
            url(HOST, QUEUE, "finish"),
            {"worker": worker, "outcomes": [{"id": task_id, "attempt": 1, "outcome": "fail"}]},
            "worker",
        ),
        (
            url(HOST, QUEUE, "finish"),
            {
                "worker": "box-1",
                "outcomes": [{"id": f"{task_id[:15]}{bad}", "attempt": 1, "outcome": "fail"}],
            },
            "id",
        ),
    ]


@pytest.mark.parametrize("bad", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_a_control_character_in_a_worker_request_is_refused_naming_the_field(world, bad):
    task = world.post()
    world.post()  # a second pending task: a claim that slipped through would take it
    world.claim()
    before = world.written()
    for path, body, field in _worker_bodies(task.id, bad):
        r = world.client("bob").post(path, body, format="json")
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), (path, r.content)
        assert r.json()["detail"].startswith(f"{field} must not hold control, format or")
        assert f"U+{ord(bad):04X}" in r.json()["detail"]
    assert world.written() == before


@pytest.mark.parametrize("bad", CONTROLS.values(), ids=CONTROLS.keys())
def test_a_control_character_in_a_batch_idempotency_key_is_refused_naming_the_entry(world, bad):
    before = world.written()
    entries = [{"item": {"n": 1}}, {"item": {"n": 2}, "idempotencyKey": f"key{bad}"}]
    r = world.client("alice").post(url(HOST, QUEUE, "tasks/batch"), {"tasks": entries},
                                   format="json")  # fmt: skip
    assert (r.status_code, r.json()["code"], r.json()["index"]) == (400, "invalid_request", 1)
    assert "idempotencyKey" in r.json()["detail"]
    assert world.written() == before


@pytest.mark.parametrize("bad", ["\u202e", "\ufeff"], ids=["RLO", "BOM"])
def test_a_concurrency_key_is_refused_as_a_worker_name_is(world, bad):
    before = world.written()
    posted = world.client("alice").post(f"{TASKS}?concurrencyKey=key{bad}1", {"n": 1},
                                        format="json")  # fmt: skip
    claimed = world.client("bob").post(url(HOST, QUEUE, "claim"), {"worker": f"box{bad}1"},
                                       format="json")  # fmt: skip
    for r, field in ((posted, "concurrencyKey"), (claimed, "worker")):
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
        assert r.json()["detail"] == (
            f"{field} must not hold control, format or separator characters, or spaces other "
            f"than U+0020 (got U+{ord(bad):04X} at position 3)."
        )
    assert world.written() == before


def test_a_worker_name_with_other_unicode_is_still_taken(world):
    world.post()
    r = world.client("bob").post(url(HOST, QUEUE, "claim"), {"worker": "bôx-1 ✓"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["lease"]["worker"] == "bôx-1 ✓"


def test_a_nul_inside_item_progress_and_result_is_kept_as_sent(world):
    """JSON may carry "\\u0000": both stores keep it (PostgreSQL's json column keeps the text;
    jsonb would refuse it), and it comes back exactly."""
    item = b'{"a": "x\\u0000y", "\\u0000key": ["\\u0001\\u007f\\u0085"]}'
    r = world.client("alice").post(TASKS, item, content_type="application/json")
    assert r.status_code == 201, r.content
    task_id = r.json()["id"]
    r = world.client("bob").post(url(HOST, QUEUE, "claim"), {"worker": "box-1"}, format="json")
    assert r.json()["item"] == {"a": "x\x00y", "\x00key": ["\x01\x7f\x85"]}
    fenced = {"worker": "box-1", "attempt": 1}
    r = world.client("bob").post(f"{TASKS}/{task_id}/progress",
                                 {**fenced, "progress": {"p": "\x00"}}, format="json")  # fmt: skip
    assert r.status_code == 200, r.content
    r = world.client("bob").post(f"{TASKS}/{task_id}/result", {**fenced, "result": ["\x00"]},
                                 format="json")  # fmt: skip
    assert r.status_code == 200, r.content
    task = world.store.read(HOST, QUEUE, task_id)
    assert (task.item["a"], task.progress, task.result) == ("x\x00y", {"p": "\x00"}, ["\x00"])
