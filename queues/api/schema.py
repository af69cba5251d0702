"""OpenAPI pieces shared by the views: the bearer scheme and every endpoint's refusals."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiViewExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from queues.api.serializers import ErrorSerializer


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "queues.api.authentication.BearerAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An API token: th_…"}


_ERRORS = {
    400: "invalid_json, invalid_item or invalid_request",
    401: "not_authenticated",
    403: "permission_denied: the caller has no role for this on the queue (or CSRF failed)",
    404: "not_found: unknown or foreign host, queue or task (the same body for all)",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "lease_lost, not_cancellable, not_retryable, not_waiting or group_closed",
    413: "payload_too_large: item, progress or result over maxItemBytes",
    415: "unsupported_media_type",
    422: "idempotency_key_reused",
    429: "queue_full (Retry-After is set)",
    500: "internal: a bug in the server, which it logs; nothing was written",
    503: "storage_unavailable: nothing was acknowledged",
}
ALWAYS = (400, 401, 403, 404, 405, 406, 500, 503)
WITH_BODY = (*ALWAYS, 413, 415)


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    return {s: OpenApiResponse(ErrorSerializer, description=_ERRORS[s]) for s in statuses}


def path_parameters(*, task: bool) -> list[OpenApiParameter]:
    params = [
        OpenApiParameter("host", str, OpenApiParameter.PATH, description="A DNS host name."),
        OpenApiParameter("queue", str, OpenApiParameter.PATH, description="A queue name."),
    ]
    if task:
        params.append(OpenApiParameter("id", str, OpenApiParameter.PATH, description="Task id."))
    return params


class EventStreamSchema(OpenApiViewExtension):
    """The events endpoint's schema, kept here beside the others so that its view stays only
    about streaming (and the schema check has nothing to guess)."""

    target_class = "queues.api.events.EventStreamView"

    def view_replacement(self) -> type:
        class Described(self.target_class):  # type: ignore[name-defined,misc]
            @extend_schema(
                operation_id="events",
                summary="Server-Sent Events of the queue's transitions, from the event log",
                parameters=[
                    *path_parameters(task=False),
                    OpenApiParameter(
                        "task", str, OpenApiParameter.QUERY, description="Only this task's events."
                    ),
                    OpenApiParameter(
                        "from",
                        str,
                        OpenApiParameter.QUERY,
                        enum=["posted"],
                        description="With task: start with the task's events so far, from its "
                        "posting, then a `: caught up` comment, then follow.",
                    ),
                    OpenApiParameter(
                        "Last-Event-ID",
                        str,
                        OpenApiParameter.HEADER,
                        description="Resume after this log position.",
                    ),
                ],
                responses={
                    (200, "text/event-stream"): OpenApiResponse(
                        OpenApiTypes.STR,
                        description="id: a log position; event: the event name; data: the "
                        "event line. A comment line every 15 s keeps an idle stream open. When "
                        "the server process holds its most streams, the answer is only a "
                        "`retry:` hint and a comment, with Retry-After: EventSource reconnects.",
                    ),
                    **errors(*ALWAYS),
                },
            )
            def get(self, request: Any, *args: Any, **kwargs: Any) -> Any:
                return super().get(request, *args, **kwargs)

        return Described
