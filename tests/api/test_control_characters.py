"""Control characters (C0, DEL, C1) in a request's name-like fields are refused naming the field,
before anything is written; inside free JSON (item, progress, result) they are kept as sent."""

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)
# NUL (PostgreSQL refuses it in text), a newline and ESC (forged log and terminal lines), DEL,
# and C1's NEL and CSI.
CONTROLS = {"NUL": "\x00", "newline": "\n", "ESC": "\x1b", "DEL": "\x7f", "NEL": "\x85",
            "CSI": "\x9b"}  # fmt: skip


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


@pytest.mark.parametrize("bad", CONTROLS.values(), ids=CONTROLS.keys())
def test_a_control_character_in_a_worker_request_is_refused_naming_the_field(world, bad):
    task = world.post()
    world.post()  # a second pending task: a claim that slipped through would take it
    world.claim()
    before = world.written()
    for path, body, field in _worker_bodies(task.id, bad):
        r = world.client("bob").post(path, body, format="json")
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), (path, r.content)
        assert r.json()["detail"].startswith(f"{field} must not hold control characters")
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
