"""A standard-library client for taskhoster's HTTP API (docs/client.md; the contract is api.md).

One `Client` may be shared by threads: each thread keeps its own keep-alive connection.
"""

from __future__ import annotations

import builtins
import http.client
import importlib.metadata
import json
import select
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from . import tracing
from .backoff import with_backoff
from .errors import ApiError
from .numerals import retry_after_seconds

__all__ = ["ApiError", "ClaimAnswer", "Client"]

# A waiting request may legitimately take `wait` seconds before the server says a word.
WAIT_MARGIN_SECONDS = 10.0
TRIES = 3  # for idempotent calls only: a repeated GET or keyed post changes nothing


def _version() -> str:
    try:
        return importlib.metadata.version("taskhoster")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout never installed
        return "unknown"


VERSION = _version()
# Named in every request, so a server's access log tells the client and its version apart from
# a browser's or curl's requests.
USER_AGENT = f"taskhoster-client/{VERSION}"


@dataclass(frozen=True)
class ClaimAnswer:
    """A claim's answer: the claimed records (empty when there was none) and whether the
    queue is paused (the server's `Queue-Paused: true` on a 204)."""

    tasks: list[dict[str, Any]]
    paused: bool = False


class Client:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        tries: int = TRIES,
        user_agent: str = USER_AGENT,
    ) -> None:
        """`tries`: how many times an idempotent call is sent when its connection fails (1: once,
        for a caller that retries by itself, as the command line does). `user_agent`: the
        User-Agent header of every request."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port][/prefix], not {base_url!r}")
        self.scheme, self.netloc = parts.scheme, parts.netloc
        self.base_url = base_url.rstrip("/")
        self.prefix = parts.path.rstrip("/") + "/api/v1"
        self.token, self.timeout, self.tries = token, timeout, max(tries, 1)
        self.user_agent = user_agent
        self._local = threading.local()

    # -- producers --------------------------------------------------------------------------

    def post(
        self,
        host: str,
        queue: str,
        item: dict[str, Any],
        *,
        delay: int | None = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
        after: builtins.list[str] | None = None,
        on_dependency_failure: str | None = None,
        concurrency_key: str | None = None,
        group: str | None = None,
        on_complete_queue: str | None = None,
        on_complete: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Post a task; answers its status view (the original task on an idempotent replay).

        `after`: ids of tasks (an id of this queue, or "queue/id" of another queue of the host)
        that must finish before this one may be claimed; `on_dependency_failure` "fail" (the
        default) or "cancel" says what a failed one does to it. `concurrency_key`: at most the
        queue's maxPerKey tasks with one key run at once. `group`: the group the task joins;
        `on_complete_queue` closes it, and once every task of it has ended a task is posted
        there, its item `on_complete` (default {}) with the group's outcome under "group"."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        callback = None if on_complete is None else json.dumps(on_complete)
        query = {"delay": delay, "priority": priority,
                 "after": ",".join(after) if after else None,
                 "onDependencyFailure": on_dependency_failure,
                 "concurrencyKey": concurrency_key, "group": group,
                 "onCompleteQueue": on_complete_queue,
                 "onComplete": callback}  # fmt: skip
        return self._call("POST", _queue_path(host, queue, "tasks"), query=query, body=item,
                          headers=headers, idempotent=idempotency_key is not None)  # fmt: skip

    def post_many(
        self,
        host: str,
        queue: str,
        tasks: builtins.list[dict[str, Any]],
        *,
        group: str | None = None,
        on_complete: dict[str, Any] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Post 1 to 100 tasks in one request; each entry is `{"item": {...}}` with optional
        `delay`, `priority`, `idempotencyKey`, `after`, `onDependencyFailure` and
        `concurrencyKey`. Answers each task's status view, in order.

        All or nothing: a refused entry raises ApiError (its `index` says which entry) and no
        task of the batch was posted. Sent again after a lost answer only when every entry has
        an idempotencyKey, so a repeat cannot post twice. `group`: the group every task joins;
        `on_complete` (`{"queue": ..., "item": {...}}`) closes it (see post)."""
        keyed = all(isinstance(t, dict) and t.get("idempotencyKey") for t in tasks)
        body: dict[str, Any] = {"tasks": tasks}
        if group is not None:
            body["group"] = group
        if on_complete is not None:
            body["onComplete"] = on_complete
        answer = self._call("POST", _queue_path(host, queue, "tasks/batch"),
                            body=body, idempotent=keyed)  # fmt: skip
        return builtins.list(answer["tasks"])

    def get(
        self,
        host: str,
        queue: str,
        id: str,
        *,
        wait: float | None = None,
        since: int | None = None,
    ) -> dict[str, Any]:
        """A task's status view; with `wait`, held until its updatedAt differs from `since`."""
        return self._call("GET", _task_path(host, queue, id), query={"wait": wait, "since": since},
                          idempotent=True, waits=wait or 0)  # fmt: skip

    def list(
        self,
        host: str,
        queue: str,
        *,
        status: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        """One page, newest first: `{"count", "next", "previous", "results"}`."""
        query = {"status": status, "limit": limit, "offset": offset}
        return self._call("GET", _queue_path(host, queue, "tasks"), query=query, idempotent=True)

    def group(self, host: str, queue: str, group: str) -> dict[str, Any]:
        """A group's progress: `state`, `posted`, `ended`, `counts` by outcome, `callback`."""
        return self._call("GET", _queue_path(host, queue, f"groups/{quote(group, safe='')}"),
                          idempotent=True)  # fmt: skip

    def cancel(self, host: str, queue: str, id: str) -> dict[str, Any]:
        return self._call("POST", _task_path(host, queue, id, "cancel"), body={})

    def retry(self, host: str, queue: str, id: str) -> dict[str, Any]:
        return self._call("POST", _task_path(host, queue, id, "retry"), body={})

    # -- workers ----------------------------------------------------------------------------

    def claim(
        self,
        host: str,
        queue: str,
        worker: str,
        *,
        wait: float = 0,
        lease: int | None = None,
        max: int | None = None,
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        """The claimed task, or None when there was none within `wait`.

        With `max`, a list of up to that many tasks (empty when there was none).
        """
        answer = self.claim_answer(host, queue, worker, wait=wait, lease=lease, max=max)
        if max is not None:
            return answer.tasks
        return answer.tasks[0] if answer.tasks else None

    def claim_answer(
        self,
        host: str,
        queue: str,
        worker: str,
        *,
        wait: float = 0,
        lease: int | None = None,
        max: int | None = None,
    ) -> ClaimAnswer:
        """`claim`, answering a ClaimAnswer: the tasks, and whether the queue is paused."""
        body: dict[str, Any] = {"worker": worker, "wait": wait}
        if lease is not None:
            body["lease"] = lease
        if max is not None:
            body["max"] = max
        status, headers, answer = self.request(
            "POST", _queue_path(host, queue, "claim"), body=body, waits=wait
        )
        if status == 204 and wait and "retry-after" in headers:
            # The server had too many claims waiting to let this one wait: come back later
            # rather than asking again at once (after the claim's own wait, should the header
            # say no number of seconds).
            after = retry_after_seconds(headers["retry-after"])
            time.sleep(min(wait if after is None else after, wait))
        paused = headers.get("queue-paused") == "true"
        if not answer:
            return ClaimAnswer([], paused)
        return ClaimAnswer(list(answer["tasks"]) if max is not None else [answer], paused)

    def stats(self, host: str, queue: str) -> dict[str, Any]:
        """The queue's counts and whether it is paused (any role on the queue may ask)."""
        return self._call("GET", _queue_path(host, queue, "stats"), idempotent=True)

    def progress(
        self,
        host: str,
        queue: str,
        id: str,
        worker: str,
        attempt: int,
        progress: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Extend the lease (and record `progress` when given): `{"lease", "cancelRequested"}`."""
        body: dict[str, Any] = {"worker": worker, "attempt": attempt}
        if progress is not None:
            body["progress"] = progress
        return self._call("POST", _task_path(host, queue, id, "progress"), body=body)

    def result(
        self,
        host: str,
        queue: str,
        id: str,
        worker: str,
        attempt: int,
        result: Any,
        *,
        claim_next: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Finish the task; answers its status view. `claim_next` (`{"max", "wait", "lease"}`,
        each optional) claims this worker's next tasks in the same request: the answer's
        `"next"` holds their records (api.md, "Claim the next task in a report")."""
        body = {"worker": worker, "attempt": attempt, "result": result}
        return self._call("POST", _task_path(host, queue, id, "result"),
                          body=_with_next(body, claim_next), waits=_waits(claim_next))  # fmt: skip

    def fail(
        self,
        host: str,
        queue: str,
        id: str,
        worker: str,
        attempt: int,
        result: Any = None,
        *,
        retry: bool = False,
        cancelled: bool = False,
        claim_next: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Report a failure; answers the task's status view (`claim_next`: as `result`'s)."""
        body: dict[str, Any] = {"worker": worker, "attempt": attempt, "retry": retry,
                                "cancelled": cancelled}  # fmt: skip
        if result is not None:
            body["result"] = result
        return self._call("POST", _task_path(host, queue, id, "fail"),
                          body=_with_next(body, claim_next), waits=_waits(claim_next))  # fmt: skip

    def finish_many(
        self, host: str, queue: str, worker: str, outcomes: builtins.list[dict[str, Any]]
    ) -> builtins.list[dict[str, Any]]:
        """Report the outcomes of 1 to 100 claimed tasks in one request; each entry is
        `{"id", "attempt", "outcome": "result" | "fail" | "retry", "result"}`. Answers one dict
        per entry, in order: `{"status": 200, "task", "replayed"}`, or a refusal of that entry
        alone, `{"status": 409, "code": "lease_lost", "detail", "index"}`."""
        return builtins.list(self.finish_many_answer(host, queue, worker, outcomes)["outcomes"])

    def finish_many_answer(
        self,
        host: str,
        queue: str,
        worker: str,
        outcomes: builtins.list[dict[str, Any]],
        *,
        claim_next: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`finish_many`, answering the whole body: `{"outcomes": [...]}`, and with
        `claim_next` (as `result`'s) the records it claimed in `"next"`."""
        body = {"worker": worker, "outcomes": outcomes}
        return self._call("POST", _queue_path(host, queue, "finish"),
                          body=_with_next(body, claim_next), waits=_waits(claim_next))  # fmt: skip

    # -- the wire ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        idempotent: bool = False,
        waits: float = 0,
    ) -> tuple[int, dict[str, str], Any]:
        """One request: (status, headers, parsed JSON or None). Raises ApiError on 4xx/5xx.

        Connection errors are retried (backoff.py's schedule) only when `idempotent`: a claim or
        a result that reached the server before the connection broke must not be sent twice.
        """
        target = self.prefix + path
        pairs = {k: v for k, v in (query or {}).items() if v is not None}
        if pairs:
            target += "?" + urlencode(pairs)
        sent = {"Accept": "application/json", "User-Agent": self.user_agent, **(headers or {})}
        tracing.inject(sent)  # the caller's trace, when OpenTelemetry is there
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        payload = None
        if body is not None:
            payload = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
            sent["Content-Type"] = "application/json"
        status, got, data = with_backoff(
            lambda: self._exchange(method, target, payload, sent, waits),
            tries=self.tries if idempotent else 1,
            repeatable=True,  # tried at all only when idempotent
            after_failure=self._drop,
        )
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            if status < 400:
                raise
            # an error page that is not the API's (a proxy's, or the server's own 500 page):
            # still a refusal with its status, so callers decide on it as on any other
            parsed = None
        if status >= 400:
            info = parsed if isinstance(parsed, dict) else {}
            detail = str(info.get("detail", data[:200].decode(errors="replace")))
            index = info.get("index")
            raise ApiError(status, str(info.get("code", "http_error")), detail, got,
                           index if isinstance(index, int) else None)  # fmt: skip
        return status, got, parsed

    def _call(self, method: str, path: str, **options: Any) -> Any:
        return self.request(method, path, **options)[2]

    def _exchange(
        self, method: str, target: str, payload: bytes | None, headers: dict[str, str], waits: float
    ) -> tuple[int, dict[str, str], bytes]:
        conn = self._connection()
        conn.timeout = self.timeout + (waits + WAIT_MARGIN_SECONDS if waits else 0)
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        conn.request(method, target, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            self._drop()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            # The server closes idle keep-alive connections (gunicorn: after 2 s). Sending a
            # non-idempotent request on one would fail, and could not safely be repeated.
            self._drop()
            conn = None
        if conn is None:
            cls = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = self._local.conn = cls(self.netloc, timeout=self.timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        self._drop()


def _closed_by_peer(sock: Any) -> bool:
    """An idle keep-alive socket that is readable has been closed (or broken) by the server."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _with_next(body: dict[str, Any], claim_next: dict[str, Any] | None) -> dict[str, Any]:
    return body if claim_next is None else {**body, "next": claim_next}


def _waits(claim_next: dict[str, Any] | None) -> float:
    """How long the server may hold a report whose next claim waits."""
    return float((claim_next or {}).get("wait") or 0)


def _queue_path(host: str, queue: str, tail: str) -> str:
    # quote(safe=""): a name with "/" or ".." must stay one path segment (the server 404s it).
    return f"/queues/{quote(host, safe='')}/{quote(queue, safe='')}/{tail}"


def _task_path(host: str, queue: str, task_id: str, action: str | None = None) -> str:
    path = _queue_path(host, queue, "tasks/" + quote(task_id, safe=""))
    return path + "/" + action if action else path
