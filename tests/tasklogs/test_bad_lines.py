"""Lines the ingester cannot store as they are: each is stored in a sanitized form or counted
bad with its file and offset, and the lines after it are always stored, on SQLite and on
PostgreSQL alike (the PostgreSQL run of the suite runs these there)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from tasklogs.ingest import ingest_directory
from tasklogs.models import TaskEvent
from tasklogs.parsing import MAX_BY, MAX_WORKER

from .conftest import encode, line

pytestmark = pytest.mark.django_db
DAY = "2025-01-01"
FILE = f"{DAY}.jsonl"


def stored() -> list[tuple[str, int, str, str]]:
    return list(TaskEvent.objects.order_by("offset").values_list("event", "offset", "worker", "by"))


def offsets(*lines: dict | bytes) -> list[int]:
    """Where each of `lines` starts once appended one after the other."""
    found, at = [], 0
    for one in lines:
        found.append(at)
        at += len(encode(one))
    return found


@pytest.mark.parametrize(
    ("worker", "kept"),
    [
        ("evil\x00worker", "evil\ufffdworker"),
        ("box\n1", "box\ufffd1"),
        ("\x1b[31mred\x7f\x9b", "\ufffd[31mred\ufffd\ufffd"),
    ],
)
def test_a_control_character_in_worker_or_by_is_stored_replaced(append, day_dir, worker, kept):
    claimed = line(event="claimed", status="processing", attempts=1, worker=worker, ms=1)
    cancelled = {**line(event="cancelled", status="cancelled", ms=2), "by": f"op{worker}"}
    after = line(event="fetched", status="cancelled", ms=3)
    append(DAY, line(), claimed, cancelled, after)
    report = ingest_directory(day_dir)
    assert (report.lines, report.bad) == (4, 0)
    assert [(e, w, b) for e, _, w, b in stored()] == [
        ("posted", "", ""),
        ("claimed", kept, ""),
        ("cancelled", "", f"op{kept}"),
        ("fetched", "", ""),
    ]


def test_every_bad_line_is_counted_where_it_is_and_the_next_one_stored(append, day_dir):
    bad = [
        b"not json",
        b'{"t": 1, "at": "2025-01-01T00:00:00.0',  # a torn tail, nothing glued to it
        {**line(), "host": 5},
        {**line(), "id": ["0123456789abcdef"]},
        {**line(), "bytes": {"item": "12"}},
        encode(line()).replace(b'"t":1735689600', b'"t":18446744073709551616')[:-1],
        line(event="claimed", status="processing", worker="w" * (MAX_WORKER + 1)),
        {**line(event="cancelled", status="cancelled"), "by": "o" * (MAX_BY + 1)},
        "\x00".join(["{}"] * 3).encode(),
    ]
    pieces = [line(ms=1)] + [b + b"\n" if isinstance(b, bytes) else b for b in bad]
    pieces.append(line(event="claimed", status="processing", attempts=1, worker="box-1", ms=2))
    append(DAY, *pieces)
    err = io.StringIO()
    call_command("ingest_tasklogs", stdout=io.StringIO(), stderr=err)
    starts = offsets(*pieces)
    assert [(e, o) for e, o, _, _ in stored()] == [("posted", 0), ("claimed", starts[-1])]
    shown = err.getvalue()
    for start in starts[1:-1]:
        assert f"bad line {FILE}:{start}: " in shown
    assert ingest_directory(day_dir).lines == 0  # all read: the cursor is past them


def test_the_columns_hold_what_the_parser_lets_through():
    """The parser's limits are the columns' own: a line that passes it is never refused by the
    database for its length."""
    assert TaskEvent._meta.get_field("worker").max_length == MAX_WORKER
    assert TaskEvent._meta.get_field("by").max_length == MAX_BY


def torn(whole: dict, keep: int) -> bytes:
    """The first `keep` bytes of a line whose writer was cut short: no newline."""
    return encode(whole)[:keep]


@pytest.mark.parametrize("keep", [1, 5, 6, 40, 150])
def test_a_torn_fragment_glued_to_the_next_line_is_cut_and_the_line_kept(append, day_dir, keep):
    cut_short = line(event="claimed", status="processing", attempts=1, worker="box-1", ms=1)
    whole = line(event="claimed", status="processing", attempts=1, worker="box-2", ms=2)
    fragment = torn(cut_short, keep)
    append(DAY, line(), fragment, whole, line(event="fetched", ms=3))
    report = ingest_directory(day_dir)
    first = len(encode(line()))
    assert [(e, o, w) for e, o, w, _ in stored()] == [
        ("posted", 0, ""),
        ("claimed", first + keep, "box-2"),
        ("fetched", first + keep + len(encode(whole)), ""),
    ]
    assert report.bad == 1
    assert str(report.bad_lines[0]) == (
        f"{FILE}:{first}: a torn line ({keep} bytes) before the line at {first + keep}"
    )
    assert ingest_directory(day_dir).lines == 0
    assert len(stored()) == 3  # a rerun stores nothing twice


def test_several_torn_fragments_before_a_line_keep_only_the_line(append, day_dir):
    a = line(event="claimed", status="processing", attempts=1, worker="box-1", ms=1)
    b = line(event="progress", status="processing", attempts=1, worker="box-1", ms=2)
    whole = line(event="result", status="finished", attempts=1, worker="box-1", ms=3)
    head = torn(a, 30) + torn(b, 60)
    append(DAY, head, whole)
    report = ingest_directory(day_dir)
    assert [(e, o) for e, o, _, _ in stored()] == [("result", len(head))]
    assert (report.lines, report.bad) == (2, 1)


@pytest.mark.parametrize(
    "tail",
    [
        b'{"t":1735689600}',  # a JSON object after the cut, but no event line
        b'{"t":1735689600,"at":"2025-01-01T00:00:00.000Z"',  # torn twice: nothing whole
        b'{"t": 1}{"t":oops}',
    ],
)
def test_nothing_is_made_up_from_a_fragment(append, day_dir, tail):
    fragment = torn(line(event="claimed", status="processing", ms=1), 50)
    append(DAY, fragment + tail + b"\n", line(event="fetched", ms=3))
    report = ingest_directory(day_dir)
    assert [e for e, _, _, _ in stored()] == ["fetched"]
    assert (report.lines, report.bad) == (2, 1)
    assert "torn" not in report.bad_lines[0].reason


def test_a_line_that_is_whole_by_itself_is_never_cut(append, day_dir: Path):
    """A worker name may hold the text {"t": escaped (\\"): the line parses as it is."""
    odd = line(event="claimed", status="processing", attempts=1, worker='x{"t":1}', ms=1)
    append(DAY, odd)
    ingest_directory(day_dir)
    assert [(e, o, w) for e, o, w, _ in stored()] == [("claimed", 0, 'x{"t":1}')]
