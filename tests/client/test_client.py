"""The client's wire behaviour against a small stub server (no Django, no gunicorn)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from taskhoster import ApiError, Client


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: list[tuple[int, object]] = []  # popped per request; ("drop", None) hangs up
    seen: list[tuple[str, str, dict, bytes]] = []

    def handle_one(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.seen.append((self.command, self.path, dict(self.headers), body))
        status, payload, *extra = self.answers.pop(0)
        if status == "drop":
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        if isinstance(payload, bytes):  # a body that is not the API's JSON (an HTML page)
            data = payload
        else:
            data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra[0] if extra else {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = handle_one

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub():
    Stub.answers, Stub.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Stub, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_refusals_raise_one_error_with_the_api_code(stub):
    handler, url = stub
    handler.answers = [(409, {"code": "lease_lost", "detail": "Not yours."})]
    with pytest.raises(ApiError) as refused:
        Client(url, "tok").result("h.example", "q", "a" * 16, "w", 1, {"x": 1})
    assert (refused.value.status, refused.value.code, refused.value.detail) == (
        409, "lease_lost", "Not yours.")  # fmt: skip
    method, path, headers, body = handler.seen[0]
    assert (method, path) == ("POST", f"/api/v1/queues/h.example/q/tasks/{'a' * 16}/result")
    assert headers["Authorization"] == "Bearer tok"
    assert json.loads(body) == {"worker": "w", "attempt": 1, "result": {"x": 1}}


def test_an_error_page_that_is_not_json_is_still_a_refusal_with_its_status(stub):
    # Django's own 500 page, or a proxy's 502: the caller retries a 5xx as any other
    handler, url = stub
    handler.answers = [(500, b"\n<h1>Server Error (500)</h1>\n")]
    with pytest.raises(ApiError) as refused:
        Client(url, "tok").request("POST", "/queues/h.example/q/tasks", body={"x": 1})
    assert (refused.value.status, refused.value.code) == (500, "http_error")
    assert "Server Error (500)" in refused.value.detail


def test_claims_answer_none_a_task_or_a_list(stub):
    handler, url = stub
    handler.answers = [(204, None), (200, {"id": "t1"}), (200, {"tasks": [{"id": "t2"}]})]
    client = Client(url)
    assert client.claim("h.example", "q", "w", wait=1) is None
    assert client.claim("h.example", "q", "w") == {"id": "t1"}
    assert client.claim("h.example", "q", "w", max=5) == [{"id": "t2"}]
    assert json.loads(handler.seen[2][3]) == {"worker": "w", "wait": 0, "max": 5}


def test_names_stay_one_path_segment_and_options_go_in_the_query(stub):
    handler, url = stub
    handler.answers = [(201, {"id": "t"})]
    Client(url).post("h.example", "../x", {"a": 1}, delay=5, idempotency_key="k-1")
    _, path, headers, _ = handler.seen[0]
    assert path == "/api/v1/queues/h.example/..%2Fx/tasks?delay=5"
    assert headers["Idempotency-Key"] == "k-1"


def test_a_post_after_other_tasks_names_them_in_the_query(stub):
    handler, url = stub
    handler.answers = [(201, {"id": "t"})]
    after = ["0123456789abcdef", "other/0a1b2c3d4e5f6071"]
    Client(url).post("h.example", "q", {"a": 1}, after=after, on_dependency_failure="cancel")
    _, path, _, _ = handler.seen[0]
    assert path == (
        "/api/v1/queues/h.example/q/tasks?after=0123456789abcdef%2Cother%2F0a1b2c3d4e5f6071"
        "&onDependencyFailure=cancel"
    )


def test_only_idempotent_calls_are_retried_after_a_dropped_connection(stub):
    handler, url = stub
    handler.answers = [("drop", None), (200, {"id": "t", "status": "pending"})]
    assert Client(url).get("h.example", "q", "t")["status"] == "pending"
    handler.answers = [("drop", None), (200, {"id": "t"})]
    with pytest.raises(OSError):
        Client(url).claim("h.example", "q", "w")
    assert len(handler.answers) == 1  # the claim was sent once, never repeated


def test_a_crowded_servers_retry_after_is_honoured_before_claiming_again(stub):
    import time

    handler, url = stub
    handler.answers = [(204, None, {"Retry-After": "1"}), (204, None)]
    client = Client(url, "tok")
    started = time.monotonic()
    assert client.claim("h.example", "q", "box-1", wait=20) is None
    assert time.monotonic() - started >= 0.9  # it waited as told, instead of asking again
    started = time.monotonic()
    assert client.claim("h.example", "q", "box-1", wait=20) is None
    assert time.monotonic() - started < 0.9  # a plain 204 (the wait ran out) returns at once


def test_a_crowded_servers_retry_after_that_is_no_number_is_no_crash(stub):
    handler, url = stub
    handler.answers = [(204, None, {"Retry-After": "nan"}), (204, None, {"Retry-After": "1_0"})]
    client = Client(url, "tok")
    # float() read "nan" (time.sleep() then raised) and "1_0" (as 10 s): the claim's own wait
    assert client.claim("h.example", "q", "box-1", wait=0.2) is None
    assert client.claim("h.example", "q", "box-1", wait=0.2) is None


def test_a_failure_body_over_the_queues_cap_is_reported_without_it(stub):
    from taskhoster import run_worker

    handler, url = stub
    task = {"id": "a" * 16, "attempts": 1, "maxAttempts": 3, "item": {}}
    too_large = {"code": "payload_too_large", "detail": "The result is 900 bytes; ..."}
    handler.answers = [(200, task), (413, too_large), (200, {"id": task["id"]})]

    def broken(job):
        raise ValueError("x" * 5000)

    assert run_worker(Client(url), "h.example", "q", "w", broken, max_tasks=1) == 1
    first, second = (json.loads(seen[3]) for seen in handler.seen[1:])
    assert first["retry"] and first["result"]["error"].startswith("ValueError: xxx")
    assert len(first["result"]["error"]) == 1000  # clipped: a body, not the whole message
    assert second == {"worker": "w", "attempt": 1, "retry": True, "cancelled": False}


def test_the_worker_loop_says_paused_once_and_resumed_once(stub, caplog):
    import logging

    from taskhoster import run_worker

    handler, url = stub
    paused = (204, None, {"Queue-Paused": "true"})
    handler.answers = [paused, paused, paused, (204, None), (204, None), paused]
    stop = threading.Event()

    class Counting(Client):
        def claim_answer(self, *args, **kwargs):
            answer = super().claim_answer(*args, **kwargs)
            if not handler.answers:
                stop.set()
            return answer

    guard = threading.Timer(30, stop.set)  # a loop that never ends must fail, not hang
    guard.start()
    with caplog.at_level(logging.INFO, logger="taskhoster.worker"):
        run_worker(Counting(url), "h.example", "q", "w", dict, wait=0, stop_event=stop)
    guard.cancel()
    assert len(handler.seen) == 6
    assert [r.getMessage() for r in caplog.records] == [
        f"worker w ready: h.example/q at {url}, concurrency 1",  # once the server answered
        "queue h.example/q paused: waiting for it to resume",
        "queue h.example/q resumed",
        "queue h.example/q paused: waiting for it to resume",
    ]


def test_claim_answer_tells_a_paused_queue_from_an_empty_one(stub):
    handler, url = stub
    handler.answers = [(204, None, {"Queue-Paused": "true"}), (204, None), (200, {"id": "t"})]
    client = Client(url)
    assert client.claim_answer("h.example", "q", "w").paused is True
    assert client.claim_answer("h.example", "q", "w").paused is False
    assert client.claim_answer("h.example", "q", "w").tasks == [{"id": "t"}]


def test_a_claim_refused_for_good_ends_the_worker_loop(stub):
    from taskhoster import run_worker

    handler, url = stub
    handler.answers = [(404, {"code": "not_found", "detail": "No such queue."})] * 50
    stop = threading.Event()
    guard = threading.Timer(10, stop.set)  # a loop that retried it would end here, not hang
    guard.start()
    with pytest.raises(ApiError) as refused:
        run_worker(Client(url), "h.example", "q", "w", dict, wait=0, stop_event=stop)
    guard.cancel()
    assert refused.value.code == "not_found"


def test_a_result_that_met_a_server_error_is_sent_again(stub):
    from taskhoster import run_worker

    handler, url = stub
    task = {"id": "t1", "attempts": 1, "item": {}}
    handler.answers = [(200, task), (503, {"code": "storage_unavailable", "detail": "Disk."}),
                       (200, {"id": "t1", "status": "finished"})]  # fmt: skip
    assert run_worker(Client(url), "h.example", "q", "w", lambda job: {"ok": 1}, wait=0,
                      max_tasks=1) == 1  # fmt: skip
    reports = [path for _, path, _, _ in handler.seen if path.endswith("/result")]
    assert len(reports) == 2


def test_a_result_over_the_queues_cap_fails_the_task_instead_of_leaving_it_to_the_lease(stub):
    from taskhoster import run_worker

    handler, url = stub
    task = {"id": "a" * 16, "attempts": 1, "maxAttempts": 3, "item": {}}
    too_large = {"code": "payload_too_large", "detail": "The result is 900 bytes; the cap is 64."}
    handler.answers = [(200, task), (413, too_large), (200, {"id": task["id"]})]
    assert run_worker(Client(url), "h.example", "q", "w", lambda job: {"big": "x" * 900},
                      max_tasks=1) == 1  # fmt: skip
    _, path, _, body = handler.seen[2]
    assert path.endswith("/fail")
    sent = json.loads(body)
    assert (sent["retry"], sent["result"]["type"]) == (False, "ResultTooLarge")
    assert "The result is 900 bytes" in sent["result"]["error"]


def test_a_pool_of_no_handlers_is_refused():
    from taskhoster import run_worker

    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        run_worker(Client("http://127.0.0.1:9"), "h.example", "q", "w", dict, concurrency=0)


def test_a_concurrency_key_goes_in_the_query(stub):
    handler, url = stub
    handler.answers = [(201, {"id": "t"})]
    Client(url).post("h.example", "q", {"a": 1}, concurrency_key="customer 7")
    _, path, _, _ = handler.seen[0]
    assert path == "/api/v1/queues/h.example/q/tasks?concurrencyKey=customer+7"


def test_a_grouped_post_and_batch_name_their_group_and_callback(stub):
    handler, url = stub
    handler.answers = [(201, {"id": "t"}), (201, {"tasks": [], "replayed": []}),
                       (200, {"id": "g/1"})]  # fmt: skip
    client = Client(url)
    client.post("h.example", "q", {"a": 1}, group="g1", on_complete_queue="reports",
                on_complete={"k": "v"})  # fmt: skip
    client.post_many("h.example", "q", [{"item": {"a": 1}}], group="g1",
                     on_complete={"queue": "reports", "item": {}})  # fmt: skip
    client.group("h.example", "q", "g/1")
    (_, post, _, _), (_, batch, _, body), (method, read, _, _) = handler.seen
    assert batch == "/api/v1/queues/h.example/q/tasks/batch"
    assert post == (
        "/api/v1/queues/h.example/q/tasks?group=g1&onCompleteQueue=reports"
        "&onComplete=%7B%22k%22%3A+%22v%22%7D"
    )
    assert json.loads(body) == {"tasks": [{"item": {"a": 1}}], "group": "g1",
                                "onComplete": {"queue": "reports", "item": {}}}  # fmt: skip
    assert (method, read) == ("GET", "/api/v1/queues/h.example/q/groups/g%2F1")
