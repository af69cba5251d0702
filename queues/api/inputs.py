"""Reading a request's body and parameters into plain values, refusing with api.md's codes.

Strict on types on purpose: a JSON `"5"` or `5.0` for an integer field is a client bug that a
lenient coercion would hide. A value out of its range, or of the wrong type where a range
applies, is refused in one wording (queues.store.errors.out_of_range), the store's own.
"""

import math
from dataclasses import dataclass
from typing import Any

import orjson
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.request import Request

from queues.api.parsers import NO_BODY, body_cap, body_too_large, chunked_body, is_chunked
from queues.store import (
    MAX_BATCH,
    STATUSES,
    InvalidRequest,
    PostEntry,
    Report,
    StoreError,
    names,
    numerals,
)
from queues.store.errors import out_of_range, shown
from queues.store.settings import QueueSettings

MISSING: Any = object()


def json_body(request: Request, queue: QueueSettings, *, batch: bool = False) -> Any:
    """The parsed body. A body must be there and must say it is JSON, and be no larger than
    this queue could take (queues.api.parsers.body_cap: a declared length over it is refused
    before anything is read; `batch`: a batch's body).

    DRF treats a missing body, or a body without a Content-Type, as `{}`: that would post an
    empty item instead of telling the client what went wrong. A chunked body (no
    Content-Length) is read where the server de-chunks it (queues.api.parsers.chunked_body).
    """
    cap = body_cap(queue, batch=batch)
    if is_chunked(request):
        return chunked_body(request, cap.limit, cap.named)
    declared = _content_length(request)
    if not declared:
        raise ParseError(NO_BODY)
    if not request.content_type:
        raise UnsupportedMediaType("", detail="Send the body as Content-Type: application/json.")
    if declared > cap.limit:
        raise body_too_large(declared, cap.limit, cap.named)
    return request.data


def json_object(request: Request, queue: QueueSettings, *, batch: bool = False) -> dict[str, Any]:
    body = json_body(request, queue, batch=batch)
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.")
    return body


def _content_length(request: Request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def string(body: dict[str, Any], name: str) -> str:
    value = body.get(name, MISSING)
    if value is MISSING:
        raise InvalidRequest(f"{name} is required.")
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string.")
    return _without_controls(name, value)


def _without_controls(name: str, value: str) -> str:
    """A name-like string as sent, or the refusal naming the field, by the one rule for names
    (queues.store.names): a NUL in a worker name would break PostgreSQL's text columns, a
    newline would forge lines wherever it is shown, a bidi override would reorder them."""
    position = names.first_unprintable(value)
    if position is not None:
        raise InvalidRequest(names.refusal(name, value, position))
    return value


def integer(
    body: dict[str, Any],
    name: str,
    default: Any = MISSING,
    *,
    low: int | None = None,
    high: int | None = None,
    unit: str = "",
) -> Any:
    """An integer field; with `low` and `high`, one in that range (refused in the one range
    wording, whatever was wrong with it)."""
    value = body.get(name, default)
    if value is MISSING:
        raise InvalidRequest(f"{name} is required.")
    if value is default:
        return value
    wrong_type = isinstance(value, bool) or not isinstance(value, int)
    if low is None or high is None:
        if wrong_type:
            raise InvalidRequest(f"{name} must be an integer (got {shown(value)}).")
    elif wrong_type or not low <= value <= high:
        raise out_of_range(name, value, low, high, unit=unit)
    return value


def seconds(body: dict[str, Any], name: str, *, high: int) -> float:
    """A wait in seconds, 0..high; a fraction is fine."""
    value = body.get(name, 0)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= high
    ):
        raise out_of_range(name, value, 0, high, kind="a number", unit="seconds")
    return float(value)


def boolean(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be true or false.")
    return value


def query(
    request: Request,
    name: str,
    kind: type,
    default: Any,
    *,
    low: int | None = None,
    high: int | None = None,
    unit: str = "",
) -> Any:
    """A query parameter as `kind` (int or float), or `default` when absent; with `low` and
    `high`, one in that range (refused in the one range wording, whatever was wrong)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    what = "an integer" if kind is int else "a number"
    value = _number(raw, kind)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        if low is not None and high is not None:
            raise out_of_range(name, raw, low, high, kind=what, unit=unit)
        raise InvalidRequest(f"{name} must be {what} (got {shown(raw)}).")
    if low is not None and high is not None and not low <= value <= high:
        sent = int(value) if isinstance(value, float) and value.is_integer() else value
        raise out_of_range(name, sent, low, high, kind=what, unit=unit)  # "got 90", as sent
    return value


# The largest offset PostgreSQL's OFFSET takes (bigint); past it the query fails, not the list.
MAX_OFFSET = 2**63 - 1


def _number(raw: str, kind: type) -> Any:
    """`raw` as `kind` written in ASCII digits (queues.store.numerals: int() and float() also
    read "٣", "1_000" and " 7 ", which no client means), or None when it is not one."""
    return numerals.integer(raw) if kind is int else numerals.number(raw)


def status_filter(request: Request) -> str | None:
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}.")
    return status


def wait_query(request: Request) -> tuple[float, int | None]:
    """`wait` (0..60 s) and `since` of a waiting read."""
    wait = query(request, "wait", float, 0.0, low=0, high=60, unit="seconds")
    return wait, query(request, "since", int, None)


def page(request: Request) -> tuple[int, int]:
    """limit (clamped to 1..200, as api.md says, never refused) and offset (a negative one
    reads as 0; one past MAX_OFFSET is refused: no store could skip that many)."""
    limit = min(max(query(request, "limit", int, 50), 1), 200)
    offset = max(query(request, "offset", int, 0), 0)
    if offset > MAX_OFFSET:
        raise out_of_range("offset", offset, 0, MAX_OFFSET)
    return limit, offset


def present(body: dict[str, Any], name: str) -> Any:
    """A field that must be there, whatever JSON it holds."""
    if name not in body:
        raise InvalidRequest(f"{name} is required.")
    return body[name]


def entries(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A batch's list of entries: 1..MAX_BATCH JSON objects."""
    value = body.get(name, MISSING)
    if not isinstance(value, list):
        raise InvalidRequest(f"{name} is required: a list of 1 to {MAX_BATCH} objects.")
    if not 1 <= len(value) <= MAX_BATCH:
        raise InvalidRequest(f"A batch holds 1 to {MAX_BATCH} {name} (got {len(value)}).")
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise InvalidRequest(f"Each of {name} must be a JSON object.").at(index)
    return value


_POST_FIELDS = frozenset({"item", "delay", "priority", "idempotencyKey", "after",
                          "onDependencyFailure", "concurrencyKey"})  # fmt: skip


def post_entries(body: dict[str, Any]) -> list[PostEntry]:
    """A batch post's entries, each refusal naming its index; ranges are the store's to check."""
    found = []
    for index, entry in enumerate(entries(body, "tasks")):
        try:
            unknown = sorted(set(entry) - _POST_FIELDS)
            if unknown:
                raise InvalidRequest(f"Unknown field {unknown[0]} in a batch entry.")
            found.append(
                PostEntry(
                    item=present(entry, "item"),
                    delay_seconds=integer(entry, "delay", 0),
                    priority=integer(entry, "priority", 0),
                    idempotency_key=_optional_string(entry, "idempotencyKey"),
                    after=_after(entry.get("after")),
                    on_dependency_failure=_optional_string(entry, "onDependencyFailure"),
                    # any JSON value: the store refuses what is not a concurrency key
                    concurrency_key=entry.get("concurrencyKey"),
                )
            )
        except StoreError as exc:
            raise exc.at(index) from exc
    return found


def _after(value: Any) -> tuple[str, ...]:
    """An entry's `after`: a list of task ids (rules.check_after checks each)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequest("after must be a list of task ids (id or queue/id).")
    return tuple(value)


def after_query(request: Any) -> list[str] | None:
    """A single post's `after` query parameter: ids separated by commas, or repeated."""
    values = [v for raw in request.query_params.getlist("after") for v in raw.split(",") if v]
    return values or None


_OUTCOME_FIELDS = frozenset({"id", "attempt", "outcome", "result"})


def reports(body: dict[str, Any]) -> list[Report]:
    """A batch finish's outcomes; a malformed entry refuses the request, naming its index."""
    found = []
    for index, entry in enumerate(entries(body, "outcomes")):
        try:
            unknown = sorted(set(entry) - _OUTCOME_FIELDS)
            if unknown:
                raise InvalidRequest(f"Unknown field {unknown[0]} in a batch entry.")
            outcome = string(entry, "outcome")
            if outcome not in ("result", "fail", "retry"):
                raise InvalidRequest("outcome must be result, fail or retry.")
            found.append(
                Report(
                    task_id=string(entry, "id"),
                    attempt=integer(entry, "attempt"),
                    outcome=outcome,  # type: ignore[arg-type]
                    result=present(entry, "result") if outcome == "result" else entry.get("result"),
                )
            )
        except StoreError as exc:
            raise exc.at(index) from exc
    return found


def _optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string.")
    return _without_controls(name, value)


def group_query(request: Any) -> tuple[Any, tuple[str, Any] | None]:
    """A single post's `group`, and its onComplete from `onCompleteQueue` and `onComplete`
    (the callback's item, a JSON object; `{}` when left out): rules.check_group checks them."""
    group = request.query_params.get("group")
    queue = request.query_params.get("onCompleteQueue")
    text = request.query_params.get("onComplete")
    if queue is None:
        if text is not None:
            raise InvalidRequest("onComplete needs onCompleteQueue.")
        return group, None
    try:
        item = {} if text is None else orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("onComplete must be a JSON object (the callback's item).") from exc
    return group, (queue, item)


def batch_group(body: dict[str, Any]) -> tuple[Any, tuple[str, Any] | None]:
    """A batch post's `group` and `onComplete` ({"queue": ..., "item": {...}})."""
    spec = body.get("onComplete")
    if spec is None:
        return body.get("group"), None
    if not isinstance(spec, dict) or set(spec) - {"queue", "item"}:
        raise InvalidRequest('onComplete must be {"queue": ..., "item": {...}}.')
    return body.get("group"), (string(spec, "queue"), spec.get("item", {}))


@dataclass(frozen=True)
class NextClaim:
    """A report's `next`: the claim made once the report is done, as a claim's own body says
    it (`max` 1..100, default 1; `wait` 0..60 seconds; `lease` in seconds)."""

    max_tasks: int
    wait: float
    lease: int | None


_NEXT_FIELDS = frozenset({"max", "wait", "lease"})


def next_claim(body: dict[str, Any], queue: QueueSettings) -> NextClaim | None:
    """A result's, fail's or batch finish's `next`, checked before the report is made: a
    malformed one refuses the request with nothing reported."""
    spec = body.get("next")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise InvalidRequest('next must be {"max": N, "wait": S, "lease": L} (each optional).')
    unknown = sorted(set(spec) - _NEXT_FIELDS)
    if unknown:
        raise InvalidRequest(f"Unknown field {unknown[0]} in next.")
    named = {f"next.{key}": value for key, value in spec.items()}  # refusals name next.max
    return NextClaim(
        max_tasks=integer(named, "next.max", 1, low=1, high=MAX_BATCH),
        wait=seconds(named, "next.wait", high=60),
        lease=integer(named, "next.lease", None, low=1, high=queue.queue_seconds, unit="seconds"),
    )
