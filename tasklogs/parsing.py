"""One line of the store's event log, checked and turned into a value (tasklogs.md).

Pure: no database, no files. A line that is not exactly the contract's shape raises BadLine,
which the ingester counts and reports; it never stops a run. A line that passes fits every
column of TaskEvent on any database: lengths are the columns' own, and a control character in
a worker or operator name or a failure's reason (PostgreSQL refuses a NUL in text) is stored
as U+FFFD.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

from queues.store.error_line import LINE_CHARS
from queues.store.errors import StoreError
from queues.store.eventlog import EVENTS, LINE_START
from queues.store.paths import validate_host, validate_queue, validate_task_id
from queues.store.records import STATUSES as STATES
from queues.text.control_characters import replaced

PAYLOAD_KINDS = ("item", "progress", "result", "error")
KINDS = frozenset(PAYLOAD_KINDS)
# A line's status is the task's state after the event, except on a `quarantined` line: that
# file could not be read, so no state is known, and it now sits in the queue's quarantine/
# directory (the directory is the status). Older day-files hold exactly this value too.
QUARANTINED = "quarantined"
STATUSES = frozenset(STATES) | {QUARANTINED}
MAX_WORKER = 255
MAX_BY = 150  # Django's user name length
MAX_REASON = LINE_CHARS  # a failure's first line, as the store clips it

_REQUIRED = frozenset(
    {"t", "at", "host", "queue", "id", "event", "status", "attempts", "worker", "bytes"}
    | {"archived"}
)


class BadLine(ValueError):
    """Not an event line of the contract."""


class EventRecord(NamedTuple):
    """One event line's fields. Immutable; a NamedTuple rather than a frozen dataclass because
    the dataclass's __init__ alone was a third of the time parsing a line took."""

    t: int
    at: dt.datetime
    host: str
    queue: str
    task_id: str
    event: str
    status: str
    attempts: int
    worker: str | None
    bytes_item: int
    bytes_progress: int
    bytes_result: int
    bytes_error: int
    archived: tuple[str, ...]
    # the optional fields (absent on most lines): the operator, the task re-posted from, an
    # edited item, a lease the sweep found lapsed
    by: str | None = None
    origin: str | None = None
    edited: bool = False
    lapsed: bool = False
    reason: str = ""  # a failure's first line (failed, requeue, timeout)


def parse_line(text: bytes | str) -> EventRecord:
    """The event of one log line (without its newline); BadLine says what is wrong."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise BadLine(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadLine("not a JSON object")
    try:
        return _record(data)
    except (KeyError, TypeError) as exc:
        raise BadLine(f"missing or mistyped field {exc}") from None
    except StoreError:
        raise BadLine("host, queue or id is not a valid name") from None


def after_torn_prefix(line: bytes) -> tuple[int, EventRecord] | None:
    """The event line glued behind a torn fragment, and where it starts in `line`; None when
    there is none to be had.

    A writer whose line was cut short (a short write, no newline) leaves its fragment in front
    of the next line: `{"t":...,"ev{"t":...}`. Each line the store writes starts with `{"t":`,
    and these five bytes cannot occur inside a JSON string (its quotes are escaped), so the
    last of them in the line is where the last line written began. What follows it is taken
    only if it parses as a whole event line by itself: nothing is ever made up from the
    fragment."""
    cut = line.rfind(LINE_START)
    if cut <= 0:
        return None
    try:
        return cut, parse_line(line[cut:])
    except BadLine:
        return None


def line_digest(line: bytes) -> int:
    """A signed 64-bit hash of the raw line: with the file and offset it makes the line's key, so
    a day-file rewritten with other content at the same offsets is not mistaken for the old one."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "big", signed=True)


def _record(d: dict[str, Any]) -> EventRecord:
    # Plain ifs, not a helper per check: this runs a million times in a backfill.
    t, at, event, status, worker = d["t"], d["at"], d["event"], d["status"], d["worker"]
    sizes, archived, attempts = d["bytes"], d["archived"], d["attempts"]
    if type(t) is not int or t < 0:  # not isinstance: bool is an int, and `true` is no time
        raise BadLine("t is not a unix time")
    if type(at) is not str or not at.endswith("Z"):
        raise BadLine("at is not an ISO time in UTC")
    try:
        when = dt.datetime.fromisoformat(at)
    except ValueError:
        raise BadLine("at is not an ISO time") from None
    if int(when.timestamp()) != t:
        raise BadLine("t and at disagree")
    if event not in EVENTS:
        raise BadLine("unknown event")
    if status not in STATUSES:
        raise BadLine("unknown status")
    if status == QUARANTINED and event != QUARANTINED:
        raise BadLine("only a quarantined line has no state")
    if type(attempts) is not int or not 0 <= attempts < 2**31:
        raise BadLine("attempts is not a count")
    if worker is not None:
        if type(worker) is not str or not 0 < len(worker) <= MAX_WORKER:
            raise BadLine("worker is not a name")
        worker = replaced(worker)  # the event is real; a NUL would not fit a text column
    if type(sizes) is not dict:
        raise BadLine("bytes is not an object")
    item, progress = sizes.get("item", 0), sizes.get("progress", 0)
    result, error = sizes.get("result", 0), sizes.get("error", 0)
    for n in (item, progress, result, error):
        if type(n) is not int or not 0 <= n < 2**63:
            raise BadLine("a byte size is not a count")
    if type(archived) is not list or (archived and not KINDS.issuperset(archived)):
        raise BadLine("archived names an unknown payload")
    host, queue = _name(validate_host, d["host"]), _name(validate_queue, d["queue"])
    task_id = validate_task_id(d["id"])
    kinds = tuple(k for k in PAYLOAD_KINDS if k in archived) if archived else ()  # one order
    if len(d) == len(_REQUIRED):  # the common line: none of the optional fields
        return EventRecord(t, when, host, queue, task_id, event, status, attempts, worker,
                           item, progress, result, error, kinds)  # fmt: skip
    by, origin = d.get("by"), d.get("from")
    edited, lapsed = d.get("edited", False), d.get("lapsed", False)
    if by is not None:
        if type(by) is not str or not 0 < len(by) <= MAX_BY:
            raise BadLine("by is not a user name")
        by = replaced(by)
    if origin is not None:
        validate_task_id(origin)
    if type(edited) is not bool or type(lapsed) is not bool:
        raise BadLine("edited and lapsed are true or absent")
    reason = d.get("reason", "")
    if type(reason) is not str:
        raise BadLine("reason is not a text")
    reason = replaced(reason[:MAX_REASON])  # the event is real: a longer reason is cut, not refused
    return EventRecord(t, when, host, queue, task_id, event, status, attempts, worker, item,
                       progress, result, error, kinds, by, origin, edited, lapsed,
                       reason)  # fmt: skip


_valid_names: set[tuple[object, str]] = set()


def _name(validate: Callable[[str], str], name: str) -> str:
    # A log names few hosts and queues a million times: check each once. The set only grows
    # by valid names, which the store allows a few thousand of at most.
    if (validate, name) not in _valid_names:
        validate(name)
        _valid_names.add((validate, name))
    return name
