"""The API's views: each resolves the queue, parses, makes one action call and renders.

Who may do what is decided in queues.api.context and queues.api.actions; bodies and parameters
are read by queues.api.inputs; every refusal is rendered by queues.api.errors.
"""

import math
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from queues.api import actions, client_socket, held_threads, inputs
from queues.api import serializers as s
from queues.api.context import QueueContext, resolve
from queues.api.errors import refusal_body
from queues.api.schema import ALWAYS, WITH_BODY, errors, path_parameters
from queues.auth.access import roles_by_queue
from queues.models import Queue, Role
from queues.store import STATUSES, Reported, State, StoreError, Task, TaskPage, limits

QUEUE = path_parameters(task=False)
TASK = path_parameters(task=True)
# A claim on a paused queue answers 204 like an empty one; this header tells the two apart,
# so a worker can say "paused" instead of "idle".
PAUSED_HEADER = "Queue-Paused"
LIMITED_HEADER = "Queue-Limited"
# Public-post queues are not listed to anonymous callers: a name handed out is what lets
# someone post to it, and a list would hand every one of them to anyone who asks.
ANONYMOUS_ROOT = (
    "Send the header 'Authorization: Bearer <token>' to see the queues you hold a role on "
    "(an administrator creates tokens in the admin or with manage.py createtoken)."
)


def _int_query(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, int, OpenApiParameter.QUERY, description=description)


class TasksView(APIView):
    @extend_schema(
        operation_id="post_task",
        summary="Post a task",
        parameters=[
            *QUEUE,
            OpenApiParameter(
                "Location",
                str,
                OpenApiParameter.HEADER,
                description="The task's URL.",
                response=[201, 200],
            ),
            OpenApiParameter(
                "Idempotent-Replayed",
                str,
                OpenApiParameter.HEADER,
                enum=["true"],
                description="An idempotent replay: the answer is the first post's task.",
                response=[200],
            ),
            _int_query("delay", "Seconds before it may be claimed, 0..queueSeconds."),
            _int_query("priority", "-100..100; higher is claimed first."),
            OpenApiParameter(
                "after",
                str,
                OpenApiParameter.QUERY,
                description=(
                    "Task ids (id of this queue, or queue/id of another queue of the host) that"
                    " must finish before this task may be claimed, separated by commas. 404 for"
                    " one the caller may not read."
                ),
            ),
            OpenApiParameter(
                "onDependencyFailure",
                str,
                OpenApiParameter.QUERY,
                enum=["fail", "cancel"],
                description=(
                    "What a failed, timed-out or cancelled dependency does to this task: fail it"
                    " (error dependency_failed, the default) or cancel it."
                ),
            ),
            OpenApiParameter(
                "concurrencyKey",
                str,
                OpenApiParameter.QUERY,
                description="1..200 printable characters: at most the queue's maxPerKey tasks "
                "with one key are in processing at once (400 invalid_request otherwise).",
            ),
            OpenApiParameter(
                "group",
                str,
                OpenApiParameter.QUERY,
                description="The group the task joins (1..64 of a-z, 0-9, '_', '-'; 400 "
                "invalid_request otherwise): a group is its first producer's, and is open until a "
                "post gives onCompleteQueue (409 group_closed after).",
            ),
            OpenApiParameter(
                "onCompleteQueue",
                str,
                OpenApiParameter.QUERY,
                description="Closes the group: once every task of it has ended, a task is posted"
                " into this queue of the host (same store; the producer role needed there).",
            ),
            OpenApiParameter(
                "onComplete",
                str,
                OpenApiParameter.QUERY,
                description="The callback's item, a JSON object (default {}); its `group` key is"
                " set to the group's outcome.",
            ),
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description=(
                    "1..255 visible ASCII characters. A repeat post with the same key and item"
                    " answers the first task while it exists. A key whose post failed before its"
                    " task was written is released by the sweep after a minute."
                ),
            ),
        ],
        request={"application/json": OpenApiTypes.OBJECT},
        responses={
            201: s.TaskStatusSerializer,
            200: OpenApiResponse(s.TaskStatusSerializer, description="Idempotent replay."),
            **errors(*WITH_BODY, 422, 429),
        },
    )
    def post(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        item = inputs.json_body(request, ctx.settings)
        group, on_complete = inputs.group_query(request)
        posted = actions.post(
            ctx,
            item,
            priority=inputs.query(request, "priority", int, 0, low=-100, high=100),
            delay=inputs.query(
                request, "delay", int, 0, low=0, high=ctx.settings.queue_seconds, unit="seconds"
            ),
            idempotency_key=request.headers.get("Idempotency-Key"),
            after=inputs.after_query(request),
            on_dependency_failure=request.query_params.get("onDependencyFailure"),
            context_of=lambda other: resolve(request, host, other),
            concurrency_key=request.query_params.get("concurrencyKey"),
            group=group,
            on_complete_spec=on_complete,
        )
        headers = {"Location": reverse("queues:api:task", args=[host, queue, posted.task.id])}
        if posted.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(
            posted.task.status_view(), status=200 if posted.replayed else 201, headers=headers
        )

    @extend_schema(
        operation_id="list_tasks",
        summary="List tasks, newest first: the caller's own, or all for an operator",
        parameters=[
            *QUEUE,
            OpenApiParameter("status", str, OpenApiParameter.QUERY, enum=STATUSES),
            _int_query("limit", "1..200, default 50; out-of-range values are clamped."),
            _int_query("offset", "Tasks to skip."),
        ],
        responses={200: s.TaskPageSerializer, **errors(*ALWAYS)},
    )
    def get(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        limit, offset = inputs.page(request)
        found = actions.list_tasks(
            ctx, status=inputs.status_filter(request), limit=limit, offset=offset
        )
        return Response(_page(request, ctx, found, limit, offset))


def _status_view(ctx: QueueContext, task: Task) -> dict[str, Any]:
    """The status view; an operator's (a read, a list, a cancel, a retry) adds `worker`, which a
    producer's leaves out (the worker is the operators' business): who holds the lease, or
    whose own report ended the task."""
    view = task.status_view()
    worker = task.lease.worker if task.lease is not None else task.ended_by
    if ctx.operator and worker:
        view["worker"] = worker
    return view


def _page(
    request: Request, ctx: QueueContext, found: TaskPage, limit: int, offset: int
) -> dict[str, Any]:
    """api.md's list answer, with links that keep the caller's other parameters."""
    url = replace_query_param(request.build_absolute_uri(), "limit", limit)
    previous = None
    if offset > 0:
        before = max(offset - limit, 0)
        previous = (
            replace_query_param(url, "offset", before)
            if before
            else remove_query_param(url, "offset")
        )
    after = offset + limit
    return {
        "count": found.count,
        "next": replace_query_param(url, "offset", after) if after < found.count else None,
        "previous": previous,
        "results": [_status_view(ctx, task) for task in found.tasks],
    }


class TaskView(APIView):
    @extend_schema(
        operation_id="read_task",
        summary="A task's status; with wait, held until it changes",
        parameters=[
            *TASK,
            OpenApiParameter("wait", float, OpenApiParameter.QUERY, description="0..60 s."),
            _int_query("since", "An updatedAt value: answer once the task's differs."),
        ],
        responses={200: s.TaskStatusSerializer, **errors(*ALWAYS)},
    )
    def get(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        wait, since = inputs.wait_query(request)
        task = actions.read(ctx, id, wait=wait, since=since)
        view = _status_view(ctx, task)
        held_by = actions.held_by(ctx, task)
        if held_by is not None:
            view["heldBy"] = held_by
        why = actions.why(ctx, task)
        if why is not None:
            view["why"] = why
        return Response(view)


class CancelView(APIView):
    @extend_schema(
        operation_id="cancel_task",
        summary="Cancel: 200 when it was pending, 202 when running (cancelRequested)",
        parameters=TASK,
        request=None,
        responses={
            200: s.TaskStatusSerializer,
            202: s.TaskStatusSerializer,
            **errors(*ALWAYS, 409),
        },
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        task = actions.cancel(ctx, id)
        return Response(
            _status_view(ctx, task), status=202 if task.status is State.PROCESSING else 200
        )


class RetryView(APIView):
    @extend_schema(
        operation_id="retry_task",
        summary="Retry a failed or cancelled task with a fresh attempt budget",
        parameters=TASK,
        request=None,
        responses={200: s.TaskStatusSerializer, **errors(*ALWAYS, 409)},
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        return Response(_status_view(ctx, actions.retry(ctx, id)))


class HastenView(APIView):
    @extend_schema(
        operation_id="hasten_task",
        summary="Make a task waiting out its retry backoff or delay claimable now (operators)",
        parameters=TASK,
        request=None,
        responses={200: s.TaskStatusSerializer, **errors(*ALWAYS, 409)},
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        return Response(_status_view(ctx, actions.hasten(ctx, id)))


class ClaimView(APIView):
    @extend_schema(
        operation_id="claim",
        summary="Claim the next task (or up to max); 204 when none came within wait",
        parameters=[
            *QUEUE,
            OpenApiParameter(
                PAUSED_HEADER,
                str,
                OpenApiParameter.HEADER,
                enum=["true"],
                description="The queue is paused: nothing is claimed until it resumes.",
                response=[204],
            ),
            OpenApiParameter(
                "Retry-After",
                int,
                OpenApiParameter.HEADER,
                description="Seconds: this server process held too many waiting requests to "
                "let the claim wait, or (with Queue-Limited: rate) until the rate limit's "
                "next token; come back after this long.",
                response=[204],
            ),
            OpenApiParameter(
                LIMITED_HEADER,
                str,
                OpenApiParameter.HEADER,
                enum=list(limits.HELD_REASONS),
                description="What held the claim back: the queue's rate limit, its "
                "maxProcessing, or every claimable task's concurrencyKey at maxPerKey.",
                response=[204],
            ),
        ],
        request=s.ClaimRequestSerializer,
        responses={
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="ClaimAnswer",
                    serializers=[s.TaskRecordSerializer, s.ClaimManySerializer],
                    resource_type_field_name=None,
                ),
                description='The full record; with "max", {"tasks": [...]}.',
            ),
            204: OpenApiResponse(
                description="Nothing could be claimed within wait (Queue-Paused: true when "
                "the queue is paused)."
            ),
            **errors(*WITH_BODY),
        },
    )
    def post(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings)
        many = body.get("max") is not None
        tasks, crowded = actions.claim(
            ctx,
            worker=inputs.string(body, "worker"),
            wait=inputs.seconds(body, "wait", high=60),
            lease=inputs.integer(
                body, "lease", None, low=1, high=ctx.settings.queue_seconds, unit="seconds"
            ),
            max_tasks=inputs.integer(body, "max", 1, low=1, high=100),
            connected=client_socket.still_connected(request.META),
        )
        if not tasks:
            headers = {}
            if ctx.settings.paused:
                headers[PAUSED_HEADER] = "true"
            if crowded:  # a claim that could not wait (too many waiting here): when to return
                headers["Retry-After"] = str(held_threads.CROWDED_RETRY_AFTER_SECONDS)
            if isinstance(tasks, limits.Claimed) and tasks.held_by is not None:
                headers[LIMITED_HEADER] = tasks.held_by
                if tasks.held_by == limits.HELD_RATE and not crowded:
                    headers["Retry-After"] = str(max(1, math.ceil(tasks.retry_after)))
            return Response(status=204, headers=headers)
        records = [task.full_view() for task in tasks]
        return Response({"tasks": records} if many else records[0])


class StatsView(APIView):
    @extend_schema(
        operation_id="queue_stats",
        summary="The queue's counts and whether it is paused",
        parameters=QUEUE,
        responses={200: s.QueueStatsSerializer, **errors(*ALWAYS)},
    )
    def get(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        stats = actions.stats(ctx)
        return Response(
            {
                "host": host,
                "queue": queue,
                "paused": ctx.settings.paused,
                "pending": stats.pending,
                "processing": stats.processing,
                "done": stats.done,
                "delayed": stats.delayed,
                "retrying": stats.retrying,
                "oldestPendingAgeMs": stats.oldest_pending_ms,
            }
        )


class ProgressView(APIView):
    @extend_schema(
        operation_id="progress",
        summary="Report progress and extend the lease",
        parameters=TASK,
        request=s.ProgressRequestSerializer,
        responses={200: s.ProgressResponseSerializer, **errors(*WITH_BODY, 409)},
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings)
        task = actions.progress(
            ctx,
            id,
            worker=inputs.string(body, "worker"),
            attempt=inputs.integer(body, "attempt"),
            progress=body.get("progress"),
        )
        lease = task.to_record()["lease"]
        return Response({"lease": lease, "cancelRequested": task.cancel_requested})


OUTCOME_REPLAYED = "Taskhoster-Outcome-Replayed"
_REPLAY = OpenApiParameter(
    OUTCOME_REPLAYED,
    str,
    OpenApiParameter.HEADER,
    enum=["true"],
    response=[200],
    description="Present when this report repeated the one that ended the attempt (same "
    "worker, attempt and body): nothing changed, and the body is the task as it stands. A "
    "different report after the end answers 409 lease_lost.",
)


def _reported(
    request: Request,
    ctx: QueueContext,
    reported: Reported,
    worker: str,
    wanted: inputs.NextClaim | None,
) -> Response:
    headers = {OUTCOME_REPLAYED: "true"} if reported.replayed else None
    answer = _with_next(request, ctx, reported.task.status_view(), wanted, worker)
    return Response(answer, headers=headers)


def _with_next(
    request: Request,
    ctx: QueueContext,
    answer: dict[str, Any],
    wanted: inputs.NextClaim | None,
    worker: str,
) -> dict[str, Any]:
    """A report's answer, with the tasks its `next` claimed once the report was made (a
    worker's next task in the request that reports its last: two requests a task, not three)."""
    if wanted is None:
        return answer
    tasks, _crowded = actions.claim(
        ctx,
        worker=worker,
        wait=wanted.wait,
        lease=wanted.lease,
        max_tasks=wanted.max_tasks,
        connected=client_socket.still_connected(request.META),
    )
    return {**answer, "next": [task.full_view() for task in tasks]}


class ResultView(APIView):
    @extend_schema(
        operation_id="result",
        summary="Finish the task with its result (the same report again answers 200 as well)",
        parameters=[*TASK, _REPLAY],
        request=s.ResultRequestSerializer,
        responses={200: s.ReportAnswerSerializer, **errors(*WITH_BODY, 409)},
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings)
        worker = inputs.string(body, "worker")
        wanted = inputs.next_claim(body, ctx.settings)
        reported = actions.finish(
            ctx,
            id,
            worker=worker,
            attempt=inputs.integer(body, "attempt"),
            result=inputs.present(body, "result"),
        )
        return _reported(request, ctx, reported, worker, wanted)


class FailView(APIView):
    @extend_schema(
        operation_id="fail",
        summary="Report a failure: failed, retried after the backoff, or cancelled (the same "
        "report again answers 200 as well)",
        parameters=[*TASK, _REPLAY],
        request=s.FailRequestSerializer,
        responses={200: s.ReportAnswerSerializer, **errors(*WITH_BODY, 409)},
    )
    def post(self, request: Request, host: str, queue: str, id: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings)
        worker = inputs.string(body, "worker")
        wanted = inputs.next_claim(body, ctx.settings)
        reported = actions.fail(
            ctx,
            id,
            worker=worker,
            attempt=inputs.integer(body, "attempt"),
            result=body.get("result"),
            retry=inputs.boolean(body, "retry"),
            cancelled=inputs.boolean(body, "cancelled"),
        )
        return _reported(request, ctx, reported, worker, wanted)


class PostManyView(APIView):
    @extend_schema(
        operation_id="post_tasks",
        summary="Post 1..100 tasks at once: all checked before any is written, all durable "
        "before the answer",
        parameters=QUEUE,
        request=s.PostManyRequestSerializer,
        responses={
            201: s.PostManySerializer,
            **errors(*WITH_BODY, 422, 429),
        },
        description="A refusal names the entry it is about in `index` (0-based), and then "
        "nothing of the batch was written. Two entries with one idempotencyKey are refused.",
    )
    def post(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings, batch=True)
        group, on_complete = inputs.batch_group(body)
        posted = actions.post_many(
            ctx,
            inputs.post_entries(body),
            context_of=lambda other: resolve(request, host, other),
            group=group,
            on_complete_spec=on_complete,
        )
        return Response(
            {
                "tasks": [p.task.status_view() for p in posted],
                "replayed": [i for i, p in enumerate(posted) if p.replayed],
            },
            status=201,
        )


class GroupProgressView(APIView):
    @extend_schema(
        operation_id="read_group",
        summary="A group's progress: its counts by outcome, and its callback once posted",
        parameters=[
            *QUEUE,
            OpenApiParameter("group", str, OpenApiParameter.PATH, description="The group."),
        ],
        responses={200: s.GroupSerializer, **errors(*ALWAYS)},
    )
    def get(self, request: Request, host: str, queue: str, group: str) -> Response:
        ctx = resolve(request, host, queue)
        return Response(actions.read_group(ctx, group).view())


class FinishManyView(APIView):
    @extend_schema(
        operation_id="finish_tasks",
        summary="Report the outcomes of 1..100 claimed tasks at once, each answered on its own",
        parameters=QUEUE,
        request=s.FinishManyRequestSerializer,
        responses={200: s.FinishManySerializer, **errors(*WITH_BODY)},
        description="Each entry's answer holds the status a single result or fail would answer: "
        "200 with the task, or a refusal of that entry alone (409 lease_lost for a lapsed lease "
        "or a task no longer this attempt's, 404, 413), never of the batch. The batch itself is "
        "refused (400, naming `index`) when empty, over 100, malformed, or naming a task twice.",
    )
    def post(self, request: Request, host: str, queue: str) -> Response:
        ctx = resolve(request, host, queue)
        body = inputs.json_object(request, ctx.settings, batch=True)
        worker = inputs.string(body, "worker")
        wanted = inputs.next_claim(body, ctx.settings)
        answers = actions.finish_many(ctx, inputs.reports(body), worker=worker)
        answer = {"outcomes": [_entry_answer(answer) for answer in answers]}
        return Response(_with_next(request, ctx, answer, wanted, worker))


def _entry_answer(answer: Reported | StoreError) -> dict[str, Any]:
    if isinstance(answer, StoreError):
        status_code, body = refusal_body(answer)
        return {"status": status_code, **body}
    return {"status": 200, "task": answer.task.status_view(), "replayed": answer.replayed}


class ApiRoot(APIView):
    """GET /api/v1/: where to read about the API, and the queues the caller can use."""

    @extend_schema(
        operation_id="api_root",
        summary="Links to the docs and schema, and the queues the caller holds a role on",
        responses={200: s.ApiRootSerializer, **errors(400, 401, 405, 406)},
    )
    def get(self, request: Request) -> Response:
        link = request.build_absolute_uri
        queues = [_queue_entry(link, queue, roles) for queue, roles in roles_by_queue(request.user)]
        answer: dict[str, Any] = {
            "docs": link(reverse("queues:api:docs")),
            "schema": link(reverse("queues:api:schema")),
            "user": request.user.get_username() if request.user.is_authenticated else None,
            "queues": queues,
        }
        if not request.user.is_authenticated:
            answer["detail"] = ANONYMOUS_ROOT
        return Response(answer)


def _queue_entry(link: Any, queue: Queue, roles: frozenset[str]) -> dict[str, Any]:
    """One queue of the root's list, with the links its roles make useful."""
    where = [queue.host.name, queue.name]
    entry: dict[str, Any] = {
        "host": queue.host.name,
        "queue": queue.name,
        "roles": sorted(roles),
        "paused": queue.paused,
        "tasks": link(reverse("queues:api:tasks", args=where)),
        "stats": link(reverse("queues:api:stats", args=where)),
    }
    if Role.WORKER in roles:
        entry["claim"] = link(reverse("queues:api:claim", args=where))
    if Role.OPERATOR in roles:
        entry["events"] = link(reverse("queues:api:events", args=where))
    return entry


class NoSuchPath(APIView):
    """Every other path under /api/v1/: the same 404 body as a missing task, never Django's
    HTML page (a name with %2F in it, for one, never reaches the patterns above)."""

    authentication_classes: list[Any] = []

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        raise NotFound()
