"""The operators' console: thin views over queues.console.operations and queues.console.insight."""

import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from queues.console import insight, operations
from queues.console.bulk_form import BulkFormError, BulkRequest
from queues.console.bulk_steps import next_step
from queues.console.charts import activity_chart
from queues.console.flow_panel import flow_panel, flow_settings
from queues.console.group_page import group_page as group_page_of
from queues.console.group_page import queue_groups
from queues.console.queue_page import queue_page as queue_page_of
from queues.console.queue_page import settings_glance
from queues.console.task_detail import task_detail
from queues.console.workers import workers_of
from queues.models import Queue
from queues.store import InvalidItem, InvalidRequest, PayloadTooLarge, StoreError, Task
from queues.templatetags.console import pretty_json
from schedules.console import schedule_rows
from webhooks.console import webhook_panel


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    board = operations.dashboard(request.user, now_ms=_now_ms())
    return render(request, "console/dashboard.html", {"board": board})


@login_required
def dashboard_json(request: HttpRequest) -> JsonResponse:
    """The dashboard's numbers, refreshed by dashboard.js every few seconds."""
    board = operations.dashboard(request.user, now_ms=_now_ms(), with_failures=False)
    lag = {"oldest_t": board.lag.oldest_t, "command": board.lag.command} if board.lag else None
    return JsonResponse({"queues": [row.as_json() for row in board.rows], "ingest_lag": lag})


@login_required
def queue_insight(request: HttpRequest, host: str, queue: str) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    report = insight.queue_insight(found, now_ms=_now_ms())
    chart = activity_chart(report.activity, label=str(found))
    return render(request, "console/insight.html", {
        "queue": found, "report": report, "chart": chart, "sampling": insight.SAMPLING,
    })  # fmt: skip


@login_required
def workers_page(request: HttpRequest, host: str = "", queue: str = "") -> HttpResponse:
    """The workers of one queue, or of every queue the user operates (no host and queue)."""
    found = operations.operated_queue(request.user, host, queue) if host else None
    queues = [found] if found else operations.operated_queues(request.user)
    view = workers_of(queues, now_ms=_now_ms())
    return render(request, "console/workers.html", {"queue": found, "view": view})


@login_required
def queue_page(request: HttpRequest, host: str, queue: str) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    now_ms = _now_ms()
    shown = queue_page_of(found, request.GET, known_actions=operations.TASK_ACTIONS, now_ms=now_ms)
    groups, more_groups = queue_groups(found)
    return render(request, "console/queue.html", {
        "queue": found, "view": shown, "now_ms": now_ms,
        # What a search cost is for whoever tunes the store, not for the operator: staff see it
        # with ?debug=1.
        "debug": request.user.is_staff and request.GET.get("debug") == "1",
        "settings_glance": settings_glance(found) + flow_settings(found),
        "flow": flow_panel(found, shown.counts, now_ms=now_ms),
        "schedules": schedule_rows(found, now=timezone.now()), "webhook": webhook_panel(found),
        "groups": groups, "more_groups": more_groups,
    })  # fmt: skip


@login_required
@require_POST
def queue_bulk(request: HttpRequest, host: str, queue: str) -> HttpResponse:
    """Bulk actions: first the count to confirm, then one chunk per request until done."""
    found = operations.operated_queue(request.user, host, queue)
    back = reverse("queues:queue", args=[host, queue])
    try:
        asked = BulkRequest.from_post(request.POST, known_actions=operations.TASK_ACTIONS)
    except BulkFormError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    if asked.filter.query():
        back += f"?{asked.filter.query()}"
    step = next_step(found, asked, by=request.user.get_username())
    if step.kind == "done":
        messages.success(request, f"{asked.action}: {asked.tally.summary()}.")
        return redirect(back)
    return render(request, "console/bulk.html", {
        "queue": found, "asked": asked, "step": step, "back": back,
    })  # fmt: skip


@login_required
def group_page(request: HttpRequest, host: str, queue: str, group: str) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    page = group_page_of(found, group)
    return render(request, "console/group.html", {"queue": found, "page": page})


@login_required
def task_page(request: HttpRequest, host: str, queue: str, task_id: str) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    return _task_page(request, found, operations.task_of(found, task_id))


def _task_page(
    request: HttpRequest, queue: Queue, task: Task, *, edited: str | None = None,
    edit_error: str | None = None, status: int = 200,
) -> HttpResponse:  # fmt: skip
    detail = task_detail(queue, task, now_ms=_now_ms(), user=request.user)
    timeline_url = reverse("tasklogs:task", args=[queue.host.name, queue.name, task.id])
    return render(request, "console/task.html", {
        "queue": queue, "task": task, "detail": detail, "timeline_url": timeline_url,
        "edited_item": edited if edited is not None else pretty_json(task.item),
        "edit_error": edit_error,
    }, status=status)  # fmt: skip


@login_required
@require_POST
def task_action(
    request: HttpRequest, host: str, queue: str, task_id: str, action: str
) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    try:
        task = operations.act_on_task(found, task_id, action, by=request.user.get_username())
    except StoreError as exc:
        messages.error(request, f"Task {task_id}: {action} refused ({exc.code}): {exc}")
        return redirect("queues:task", host=host, queue=queue, task_id=task_id)
    if action == "delete":
        messages.success(request, f"Task {task_id} deleted; its events stay in Task Logs.")
        return redirect("queues:queue", host=host, queue=queue)
    messages.success(request, f"Task {task_id}: {action} done, now {task.status}.")
    return redirect("queues:task", host=host, queue=queue, task_id=task_id)


@login_required
@require_POST
def task_edit_retry(request: HttpRequest, host: str, queue: str, task_id: str) -> HttpResponse:
    """Retry with the item the operator edited; a refusal shows the page again with their text
    kept and the reason beside it."""
    found = operations.operated_queue(request.user, host, queue)
    text = request.POST.get("item", "")
    try:
        operations.edit_and_retry(found, task_id, text, by=request.user.get_username())
    except (InvalidItem, InvalidRequest, PayloadTooLarge) as exc:  # the item's fault: fix it
        task = operations.task_of(found, task_id)
        error = f"Not retried ({exc.code}): {exc}"
        return _task_page(request, found, task, edited=text, edit_error=error, status=400)
    except StoreError as exc:  # the task's state: no edit would help
        messages.error(request, f"Task {task_id}: edit and retry refused ({exc.code}): {exc}")
        return redirect("queues:task", host=host, queue=queue, task_id=task_id)
    messages.success(request, f"Task {task_id}: item edited and retried, now pending.")
    return redirect("queues:task", host=host, queue=queue, task_id=task_id)


@login_required
@require_POST
def task_repost(request: HttpRequest, host: str, queue: str, task_id: str) -> HttpResponse:
    """A new task from the archived item of this one, which the store may have cleaned: so it
    is answered from the console's task page and from Task Logs' alike."""
    found = operations.operated_queue(request.user, host, queue)
    try:
        new = operations.repost(found, task_id, by=request.user.get_username())
    except StoreError as exc:
        messages.error(request, f"Task {task_id}: re-post refused ({exc.code}): {exc}")
        return redirect("tasklogs:task", host=host, queue=queue, task_id=task_id)
    messages.success(request, f"Re-posted {task_id} as the new task {new.id}.")
    return redirect("queues:task", host=host, queue=queue, task_id=new.id)


@login_required
@require_POST
def queue_pause(request: HttpRequest, host: str, queue: str) -> HttpResponse:
    found = operations.operated_queue(request.user, host, queue)
    operations.set_paused(found, request.POST.get("paused") == "1")
    messages.success(request, f"{found} is {'paused' if found.paused else 'running'}.")
    return redirect("queues:queue", host=host, queue=queue)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
