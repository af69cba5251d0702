"""parse_line: the contract's line becomes a record; anything else is a BadLine."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest

from tasklogs.parsing import BadLine, line_digest, parse_line

from .conftest import DAY1, TASK, line


def test_a_line_of_the_contract_becomes_every_field() -> None:
    raw = orjson.dumps(
        line(ms=250, event="result", status="finished", attempts=2, worker="box-1",
             sizes={"item": 3, "progress": 4, "result": 5, "error": 0}, archived=["result"])
    )  # fmt: skip
    r = parse_line(raw)
    assert (r.t, r.host, r.queue, r.task_id) == (DAY1, "task.example.com", "resize", TASK)
    assert r.at == dt.datetime(2025, 1, 1, 0, 0, 0, 250_000, tzinfo=dt.UTC)
    assert (r.event, r.status, r.attempts, r.worker) == ("result", "finished", 2, "box-1")
    assert (r.bytes_item, r.bytes_progress, r.bytes_result, r.bytes_error) == (3, 4, 5, 0)
    assert r.archived == ("result",)
    assert parse_line(raw.decode()) == r


def test_a_quarantined_line_says_quarantined_as_its_status() -> None:
    """The sweep's line for a file it could not read (and day-files written before any change):
    there is no record, so no state; the file now sits in quarantine/."""
    raw = orjson.dumps(line(event="quarantined", status="quarantined", attempts=0,
                            sizes={"item": 0, "progress": 0, "result": 0, "error": 0}))  # fmt: skip
    assert (parse_line(raw).event, parse_line(raw).status) == ("quarantined", "quarantined")


def test_the_optional_fields_are_read_when_there_and_absent_otherwise() -> None:
    plain = parse_line(orjson.dumps(line()))
    assert (plain.by, plain.origin, plain.edited, plain.lapsed) == (None, None, False, False)
    raw = orjson.dumps({**line(event="retried", status="pending"), "by": "olga",
                        "from": "00112233aabbccdd", "edited": True, "lapsed": False})  # fmt: skip
    r = parse_line(raw)
    assert (r.by, r.origin, r.edited, r.lapsed) == ("olga", "00112233aabbccdd", True, False)


def _without(field: str) -> dict:
    d = line()
    del d[field]
    return d


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"not json",
        b'{"t": 1',  # a torn line
        b"[1, 2]",
        orjson.dumps(_without("host")),
        orjson.dumps({**line(), "t": "1735689600"}),
        orjson.dumps({**line(), "t": True}),
        orjson.dumps({**line(), "t": DAY1 + 5}),  # t and at disagree
        orjson.dumps({**line(), "at": "yesterday"}),
        orjson.dumps({**line(), "event": "exploded"}),
        orjson.dumps({**line(), "event": ["posted"]}),
        orjson.dumps({**line(), "status": "weird"}),
        orjson.dumps({**line(), "event": "claimed", "status": "quarantined"}),
        orjson.dumps({**line(), "attempts": -1}),
        orjson.dumps({**line(), "worker": ""}),
        orjson.dumps({**line(), "worker": "w" * 256}),
        orjson.dumps({**line(), "bytes": {"item": -1}}),
        orjson.dumps({**line(), "bytes": [1]}),
        orjson.dumps({**line(), "archived": ["secrets"]}),
        orjson.dumps({**line(), "host": "../etc"}),
        orjson.dumps({**line(), "host": "Task.Example.com"}),
        orjson.dumps({**line(), "queue": "a/b"}),
        orjson.dumps({**line(), "id": "0123456789ABCDEF"}),
        orjson.dumps({**line(), "id": "../../settings"}),
        orjson.dumps({**line(), "by": ""}),
        orjson.dumps({**line(), "by": 7}),
        orjson.dumps({**line(), "by": "u" * 151}),
        orjson.dumps({**line(), "from": "../../settings"}),
        orjson.dumps({**line(), "from": 12}),
        orjson.dumps({**line(), "edited": "yes"}),
        orjson.dumps({**line(), "lapsed": 1}),
    ],
)
def test_anything_else_is_a_bad_line(bad: bytes) -> None:
    with pytest.raises(BadLine):
        parse_line(bad)


def test_the_digest_tells_lines_apart() -> None:
    a, b = orjson.dumps(line()), orjson.dumps(line(event="claimed"))
    assert line_digest(a) == line_digest(a)
    assert line_digest(a) != line_digest(b)
    assert -(2**63) <= line_digest(a) < 2**63
