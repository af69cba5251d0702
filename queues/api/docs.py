"""What the API docs page (/api/v1/docs/) says beyond the endpoints: how to get a token, that
times are epoch milliseconds, a task's life, the way back to the console, and real bodies in
place of the `additionalProp1` Swagger makes up for a free-form JSON object.

The examples are added by a drf-spectacular postprocessing hook, by component and property
name, so the API's views and serializers stay about the API (tests/test_api_docs.py checks
that every example still lands).
"""

from __future__ import annotations

from typing import Any

DESCRIPTION = """
Producers post tasks and read their results; workers claim tasks, report progress and a result
or a failure; monitors follow a queue's events. [← Back to the console](/) ·
[Task logs](/logs/)

## Getting a token

Every call carries `Authorization: Bearer th_…`. An admin creates a token in the admin under
*API tokens* (it is shown once, then kept only as a hash), or on the server with
`manage.py createtoken USER --name box-1`. What the token may do on a queue is its user's role
there: **producer** (post, read and cancel its own tasks), **worker** (claim, report) or
**operator** (everything, and the console), given in the admin under *Queue access* or with
`manage.py grant USER HOST/QUEUE ROLE`. A queue with *public post* takes posts without a token.

## Times

Every time in a body is **epoch milliseconds** (UTC): `postedAt`, `updatedAt`, `finishedAt`,
`fetchedAt`, `availableAt`, `lease.until`. Durations in requests are **seconds**: `delay`,
`wait`, `lease`.

## A task's life

1. **pending**: posted (`POST …/tasks`); with `delay`, not claimable before `availableAt`.
2. **processing**: claimed (`POST …/claim`), held by a lease. Progress extends the lease; a lease
   that lapses puts the task back to pending for another worker (`attempts` counts the claims).
3. It ends **finished** (`…/result`), **failed** (`…/fail`, or `error: "timeout"` past the queue's
   timeout, `"attempts"` past its attempt budget) or **cancelled** (`…/cancel`). A failure
   with `retry: true` goes back to pending after a backoff instead; an operator may retry a
   failed or cancelled task.
4. The producer reads it (`GET …/tasks/{id}`, `wait` to hold the request until it changes); the
   first read of an ended task sets `fetchedAt`.
5. Ended tasks stay readable for the queue's retention, then the store removes them; Task Logs
   keeps their history.
""".strip()

ITEM = {"url": "https://example.com/photos/cat.jpg", "sizes": [64, 256, 1024]}
PROGRESS = {"done": 2, "of": 3, "stage": "resizing"}
RESULT = {
    "thumbnails": [
        "https://cdn.example.com/cat-64.jpg",
        "https://cdn.example.com/cat-256.jpg",
        "https://cdn.example.com/cat-1024.jpg",
    ]
}
FAILURE = {"reason": "the image is 40 MB; this worker takes up to 20 MB"}
POSTED_AT = 1_751_500_000_000
LEASE = {"worker": "box-1", "until": POSTED_AT + 62_000}

# (component, property) -> example; ("*", property) for every component with that property.
PROPERTY_EXAMPLES: dict[tuple[str, str], Any] = {
    ("*", "item"): ITEM,
    ("*", "progress"): PROGRESS,
    ("*", "result"): RESULT,
    ("*", "lastError"): FAILURE,
    ("FailRequest", "result"): FAILURE,
}
# Whole bodies, where the parts alone would not tell one story.
COMPONENT_EXAMPLES: dict[str, Any] = {
    "TaskStatus": {
        "id": "9f2c1a0b7d4e6f83",
        "host": "task.example.com",
        "queue": "resize",
        "status": "finished",
        "attempts": 1,
        "progress": PROGRESS,
        "result": RESULT,
        "error": None,
        "postedAt": POSTED_AT,
        "updatedAt": POSTED_AT + 9_400,
        "finishedAt": POSTED_AT + 9_400,
    },
    "TaskRecord": {
        "id": "9f2c1a0b7d4e6f83",
        "host": "task.example.com",
        "queue": "resize",
        "status": "processing",
        "item": ITEM,
        "postedBy": "shop-backend",
        "attempts": 1,
        "lease": LEASE,
        "progress": None,
        "result": None,
        "error": None,
        "postedAt": POSTED_AT,
        "updatedAt": POSTED_AT + 2_000,
        "finishedAt": None,
        "fetchedAt": None,
    },
    "ClaimRequest": {"worker": "box-1", "wait": 20},
    "ProgressRequest": {"worker": "box-1", "attempt": 1, "progress": PROGRESS},
    "ProgressResponse": {"lease": LEASE, "cancelRequested": False},
    "ResultRequest": {"worker": "box-1", "attempt": 1, "result": RESULT},
    "FailRequest": {"worker": "box-1", "attempt": 1, "result": FAILURE, "retry": True},
}
# Request bodies that are no component (the item is any JSON object), by operation id.
REQUEST_EXAMPLES = {"post_task": ITEM}


def add_examples(result: dict[str, Any], **_: Any) -> dict[str, Any]:
    """drf-spectacular's POSTPROCESSING_HOOKS entry: the examples above, into the schema."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        for prop, schema in component.get("properties", {}).items():
            example = PROPERTY_EXAMPLES.get((name, prop), PROPERTY_EXAMPLES.get(("*", prop)))
            if example is not None:
                schema["example"] = example
        if name in COMPONENT_EXAMPLES:
            component["example"] = COMPONENT_EXAMPLES[name]
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            example = REQUEST_EXAMPLES.get(operation.get("operationId"))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if example is not None and body is not None:
                body["example"] = example
    return result
