"""The soak's checker on synthetic runs: a clean run passes, and each thing the issue names as a
failure (a lost task, a traceback, a 500, a lost event line, an unexplained death...) fails it.

The runs are real directories: JSONL logs, task files, day-files, a FIFO made with mkfifo, and
an SQLite file with Task Logs' columns that the checker reads.
"""

import json
import os
import sqlite3
from pathlib import Path

import pytest

from chaos.server import HOST, QUEUE
from soak import checks
from soak.system import kind_of

A, B, C = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"
DAY = "2026-12-01.jsonl"
ACCESS = (
    '127.0.0.1 - - [01/Dec/2026:21:00:00 +0000] "POST /api/v1/queues/x/y/tasks HTTP/1.1" {} 91 '
    '"-" "python"'
)


def event(tid: str, name: str, status: str, attempts: int = 1) -> dict:
    return {"t": 1796160000, "at": "2026-12-01T21:00:00.000Z", "host": HOST, "queue": QUEUE,
            "id": tid, "event": name, "status": status, "attempts": attempts}  # fmt: skip


def write_jsonl(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


class Run:
    """A synthetic soak run: two tasks posted (one keyed, one not), both ended once."""

    def __init__(self, root: Path) -> None:
        self.dir, self.items, self.logs = root / "run", root / "items", root / "logs"
        self.db = self.dir / "db.sqlite3"
        self.queue_dir = self.items / HOST / QUEUE
        for state in ("pending", "processing", "done"):
            (self.queue_dir / state).mkdir(parents=True)
        write_jsonl(self.dir / "load" / "poster0.jsonl", [
            {"e": "intent", "key": "k1"}, {"e": "ack", "key": "k1", "id": A, "s": 201},
            {"e": "ack", "key": None, "id": B, "s": 201},
            {"e": "http", "s": 503, "code": "storage_unavailable", "op": "post"},
            {"e": "requests", "n": 9},
        ])  # fmt: skip
        self.task(A, "done", "finished", key="k1")
        self.task(B, "done", "failed")
        self.events = [
            event(A, "posted", "pending", 0), event(A, "claimed", "processing"),
            event(A, "result", "finished"), event(B, "posted", "pending", 0),
            event(B, "claimed", "processing"), event(B, "failed", "failed"),
        ]  # fmt: skip
        write_jsonl(self.dir / "procs.jsonl", [
            {"t": 1.0, "e": "started", "pid": 10, "kind": "serve"},
            {"t": 1.0, "e": "started", "pid": 11, "kind": "sweep"},
            {"t": 5.0, "e": "died", "pid": 11, "kind": "sweep", "caused": True},
            {"t": 6.0, "e": "started", "pid": 12, "kind": "sweep"},
        ])  # fmt: skip
        write_jsonl(self.dir / "faults.jsonl", [
            {"op": "fill_items", "t": 2.0}, {"op": "kill_sweep", "t": 4.9, "pid": 11,
                                              "kind": "sweep"},
            {"op": "ro_logs", "t": 7.0, "error": "busy"},
        ])  # fmt: skip
        (self.dir / "serve.out").write_text(ACCESS.format(201) + "\n" + ACCESS.format(503) + "\n")
        (self.dir / "serve.err").write_text("[INFO] Booting worker with pid: 13\n")
        (self.dir / "after_faults.json").write_text(json.dumps({"problems": []}))

    def task(self, tid: str, state: str, status: str, key: str | None = None, **more) -> None:
        record = {"id": tid, "host": HOST, "queue": QUEUE, "status": status, "rev": 3, **more}
        if key is not None:
            record["idempotencyKey"] = key
        (self.queue_dir / state / f"{tid}.json").write_text(json.dumps(record))

    def write_log(self, raw: bytes | None = None, store_all: bool = True) -> None:
        """The day-file (`raw`, or the events one a line) and Task Logs' rows for its lines."""
        data = (
            raw
            if raw is not None
            else b"".join(json.dumps(e).encode() + b"\n" for e in self.events)
        )
        (self.logs / "tasks").mkdir(parents=True, exist_ok=True)
        (self.logs / "tasks" / DAY).write_bytes(data)
        with sqlite3.connect(self.db) as conn:
            conn.execute("DROP TABLE IF EXISTS tasklogs_taskevent")
            conn.execute("CREATE TABLE tasklogs_taskevent (file, offset, task_id, event, "
                         "status, host, queue)")  # fmt: skip
            if store_all:
                for line in checks.day_lines(self.logs / "tasks"):
                    if line.event is not None and line.terminated:
                        e = line.event
                        conn.execute("INSERT INTO tasklogs_taskevent VALUES (?,?,?,?,?,?,?)",
                                     (line.file, line.offset, e["id"], e["event"], e["status"],
                                      e["host"], e["queue"]))  # fmt: skip

    def verdict(self) -> checks.Verdict:
        if not (self.logs / "tasks" / DAY).exists():
            self.write_log()
        return checks.check(self.dir, items=self.items, logs=self.logs, db=self.db)


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)


def failed_with(v: checks.Verdict, words: str) -> bool:
    return any(words in failure for failure in v.failures)


def test_a_clean_run_passes_and_counts_what_it_saw(run):
    v = run.verdict()
    assert v.failures == []
    assert v.figures["faults injected"] == {"fill_items": 1, "kill_sweep": 1}
    assert v.figures["requests / 503 storage_unavailable / other 5xx"] == "9 / 1 / 0"
    assert v.figures["LOST (acked, not ended)"] == 0


def test_an_acknowledged_task_still_processing_is_lost_and_stuck(run):
    (run.queue_dir / "done" / f"{A}.json").unlink()
    run.task(A, "processing", "processing", key="k1")
    run.events = run.events[:2] + run.events[3:]
    v = run.verdict()
    assert failed_with(v, "1 acknowledged tasks not ended")
    assert failed_with(v, "1 tasks still pending or processing after the drain")


def test_an_acknowledged_task_missing_from_the_store_is_lost(run):
    (run.queue_dir / "done" / f"{B}.json").unlink()
    assert failed_with(run.verdict(), "1 acknowledged tasks not ended")


def test_a_traceback_in_any_log_fails(run):
    (run.dir / "serve.err").write_text(
        "Traceback (most recent call last):\n  File x.py, line 1\nOSError: [Errno 28] No space\n"
    )
    v = run.verdict()
    assert failed_with(v, "1 tracebacks in the logs")
    assert failed_with(v, "OSError: [Errno 28] No space")


def test_a_500_answer_fails_but_a_503_storage_unavailable_does_not(run):
    with open(run.dir / "load" / "claimer0.jsonl", "a") as log:
        log.write(json.dumps({"e": "http", "s": 500, "code": "internal", "op": "claim"}) + "\n")
    assert failed_with(run.verdict(), "1 answers 5xx other than 503 storage_unavailable")


def test_a_503_without_the_documented_code_fails(run):
    with open(run.dir / "load" / "claimer0.jsonl", "a") as log:
        log.write(json.dumps({"e": "http", "s": 503, "code": "not-json", "op": "events"}) + "\n")
    assert failed_with(run.verdict(), "other than 503 storage_unavailable")


def test_a_500_in_the_access_log_fails(run):
    with open(run.dir / "serve.out", "a") as out:
        out.write(ACCESS.format(500) + "\n")
    v = run.verdict()
    assert failed_with(v, "1 answers 5xx other than 503 in the access log")
    assert v.figures["access log: 503 / other 5xx"] == "1 / 1"


def test_an_event_line_glued_after_a_torn_fragment_is_lost(run):
    lines = [json.dumps(e).encode() for e in run.events]
    torn = lines[0][:20]  # a fragment, then the next line written straight after it
    run.write_log(torn + lines[1] + b"\n" + b"\n".join(lines[2:]) + b"\n")
    assert failed_with(run.verdict(), "1 event lines lost: glued after a torn fragment")


def test_an_event_glued_after_a_fragment_that_task_logs_stored_is_not_lost(run):
    lines = [json.dumps(e).encode() for e in run.events]
    torn = lines[1][:20]  # the claim's line cut short; the result's line written after it
    run.write_log(b"\n".join([lines[0], torn + lines[2], *lines[3:]]) + b"\n")
    with sqlite3.connect(run.db) as conn:  # the ingester found the line start after the cut
        start = len(lines[0]) + 1 + len(torn)
        conn.execute("INSERT INTO tasklogs_taskevent VALUES (?,?,?,?,?,?,?)",
                     (DAY, start, A, "result", "finished", HOST, QUEUE))  # fmt: skip
    v = run.verdict()
    assert v.failures == []
    assert v.figures["event lines (whole / torn fragments)"] == "4 / 1"


def test_a_torn_fragment_ended_by_its_newline_then_a_whole_line_is_allowed(run):
    lines = [json.dumps(e).encode() for e in run.events]
    run.write_log(b"\n".join([lines[0][:20], *lines]) + b"\n")
    v = run.verdict()
    assert v.failures == []
    assert v.figures["event lines (whole / torn fragments)"] == "6 / 1"


def test_a_torn_fragment_followed_by_another_is_not_resynchronised(run):
    lines = [json.dumps(e).encode() for e in run.events]
    run.write_log(b"\n".join([lines[0][:20], b'{"t": 17', *lines]) + b"\n")
    assert failed_with(run.verdict(), "torn fragments not followed by a whole line")


def test_an_event_line_without_its_newline_is_lost(run):
    run.write_log(b"".join(json.dumps(e).encode() + b"\n" for e in run.events)[:-1])
    assert failed_with(run.verdict(), "1 event lines never ended by a newline")


def test_a_line_task_logs_never_stored_is_lost(run):
    run.write_log(store_all=False)
    v = run.verdict()
    assert failed_with(v, "6 event lines Task Logs never stored")
    assert failed_with(v, "not ended exactly once")


def test_a_line_task_logs_stored_as_the_line_that_was_there_before_fails(run):
    """The day-file written over where Task Logs had already read a line (the store cut back a
    whole line of a batch a full disk cut short): the offset is stored, with another event."""
    run.write_log()
    with sqlite3.connect(run.db) as conn:
        conn.execute("UPDATE tasklogs_taskevent SET event = 'claimed', status = 'processing' "
                     "WHERE task_id = ? AND event = 'failed'", (B,))  # fmt: skip
    v = run.verdict()
    assert failed_with(v, "1 event lines stored by Task Logs as another line")
    assert failed_with(v, f"{B}: 1 in the day-files, 0 in Task Logs")


def test_a_task_ended_twice_in_the_log_fails(run):
    run.events.append(event(A, "result", "finished", 2))
    assert failed_with(run.verdict(), f"{A}: 2 in the day-files, 2 in Task Logs")


def test_an_unparseable_event_stream_line_fails(run):
    write_jsonl(run.dir / "load" / "reader0.jsonl", [{"e": "sse_bad", "raw": 'data: {"t":'}])
    assert failed_with(run.verdict(), "1 event-stream data lines that do not parse")


def test_a_death_the_soak_did_not_cause_fails(run):
    with open(run.dir / "procs.jsonl", "a") as procs:
        procs.write(json.dumps({"t": 9.0, "e": "died", "pid": 13, "kind": "web-worker",
                                "caused": False}) + "\n")  # fmt: skip
    assert failed_with(run.verdict(), "1 process deaths the soak did not cause")


def test_a_killed_child_serve_never_replaced_fails(run):
    write_jsonl(run.dir / "procs.jsonl", [
        {"t": 1.0, "e": "started", "pid": 11, "kind": "sweep"},
        {"t": 5.0, "e": "died", "pid": 11, "kind": "sweep", "caused": True},
    ])  # fmt: skip
    assert failed_with(run.verdict(), "serve started no new sweep after the soak killed pid 11")


def test_a_task_no_post_explains_fails_and_a_keyed_intent_explains_one(run):
    run.task(C, "done", "finished", key="k9")
    run.events += [event(C, "posted", "pending", 0), event(C, "result", "finished")]
    assert failed_with(run.verdict(), "1 tasks no post explains")
    with open(run.dir / "load" / "poster1.jsonl", "a") as log:
        log.write(json.dumps({"e": "intent", "key": "k9"}) + "\n")  # its answer was lost
    assert run.verdict().failures == []


def test_a_schedule_task_needs_no_post_but_must_end(run):
    run.task(C, "pending", "pending", postedBy=checks.SCHEDULE_POSTER)
    run.events.append(event(C, "posted", "pending", 0))
    v = run.verdict()
    assert not failed_with(v, "no post explains")
    assert failed_with(v, "1 tasks still pending or processing after the drain")


def test_after_the_faults_problems_fail_the_run(run):
    (run.dir / "after_faults.json").write_text(json.dumps({"problems": ["pending/x.json: y"]}))
    assert failed_with(run.verdict(), "1 entries neither claimable nor held after the faults")


def test_a_run_whose_after_faults_check_never_ran_fails(run):
    (run.dir / "after_faults.json").unlink()
    assert failed_with(run.verdict(), "never checked")


def test_state_problems_names_every_planted_file_and_a_lapsed_lease(run):
    now = 1_000_000
    pending, processing = run.queue_dir / "pending", run.queue_dir / "processing"
    os.mkfifo(pending / f"{C}.json")
    (processing / "notes.txt").write_text("hello")
    (pending / "dddddddddddddddd.json").write_bytes(b'{"id": "dddd')
    other = {"id": "eeeeeeeeeeeeeeee", "host": "other.example.com", "queue": "elsewhere"}
    (pending / "eeeeeeeeeeeeeeee.json").write_text(json.dumps(other))
    run.task("ffffffffffffffff", "processing", "processing", lease={"worker": "w", "until": 1})
    run.task("0000000000000001", "processing", "processing", lease={"worker": "w", "until": now})
    run.task("0000000000000002", "pending", "pending")
    problems = checks.state_problems(run.queue_dir, now_ms=now, grace_ms=2000)
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    assert "notes.txt" not in joined  # no task: counted apart, not a failure
    assert checks.foreign_files(run.queue_dir) == ["processing/notes.txt"]
    for words in ("not a regular file", "corrupt or truncated",
                  "another queue's record", "ffffffffffffffff.json: its lease lapsed"):  # fmt: skip
        assert words in joined


def test_state_problems_names_what_was_planted_beside_the_state_directories(run):
    queue = run.queue_dir
    for name in ("dependents", "keys", "groups/g1/members", "groups/g2", "groups/g3/ended"):
        (queue / name).mkdir(parents=True)
    # the store's own, as it makes them: no problem
    (queue / "dependents" / f"{C}.waiters").write_bytes(b"\nq/0000000000000001\n")
    (queue / "keys" / f"{'a' * 32}.json").write_bytes(b"{}")
    (queue / "groups" / "g1" / "count").write_bytes(b"0\n")
    (queue / "keys" / "notes.txt").mkdir()  # no key's name: not the store's business
    # planted
    os.mkfifo(queue / "dependents" / "0000000000000001.waiters")
    (queue / "keys" / f"{'b' * 32}.json").mkdir()
    (queue / "groups" / "g1" / "owner").symlink_to(queue / "keys")
    (queue / "groups" / "g2" / "members").write_bytes(b"")
    os.mkfifo(queue / "groups" / "g4")
    problems = checks.state_problems(queue, now_ms=1_000_000, grace_ms=2000)
    assert sorted(problems) == [
        "dependents/0000000000000001.waiters: not a regular file, left in place",
        "groups/g1/owner: not a regular file, left in place",
        "groups/g2/members: not a directory, left in place",
        "groups/g4: not a directory, left in place",
        f"keys/{'b' * 32}.json: not a regular file, left in place",
    ]


def test_a_child_is_known_by_a_word_of_its_command_line_not_by_serves_options():
    serve = ["python", "manage.py", "serve", "--bind", "127.0.0.1:1", "--sweep-interval", "1"]
    assert kind_of(serve) == "other"  # a child between its fork and its exec
    assert kind_of(["python", "manage.py", "sweep", "--loop", "--interval", "1"]) == "sweep"
    assert kind_of(["python", "manage.py", "ingest_tasklogs", "--follow"]) == "ingest"
    assert kind_of(["python", "-m", "gunicorn", "-c", "gunicorn.conf.py"]) == "web"
