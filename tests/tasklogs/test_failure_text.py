"""Failures as people read them: a traceback shown as its lines on the task page and the
archived-payload page, and a failure's first line in Task Logs and the dashboard's Recent
failures, instead of one JSON string with literal \\n and a count of bytes."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from queues import stores
from queues.store.error_line import error_line
from queues.text.readable_json import readable_json_html
from tasklogs.links import payload_url

from .conftest import DAY1

pytestmark = pytest.mark.django_db
HOST = "task.example.com"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/resize.py", line 12, in handle\n'
    "    raise ValueError(name)\n"
    "ValueError: <cat>.png is not an image"
)
BODY = {"error": "ValueError: <cat>.png is not an image", "type": "ValueError",
        "traceback": TRACEBACK}  # fmt: skip


@pytest.fixture
def staff(client):
    client.force_login(get_user_model().objects.create_user("root", is_staff=True))
    return client


def failed_task(make_queue, day_dir, *, archive: bool, store_kind: str = "files"):
    """A task whose one attempt failed with BODY, its events ingested into Task Logs."""
    queue = make_queue(HOST, "resize", archive_payloads=archive, max_attempts=1, store=store_kind)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    now = DAY1 * 1000
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None, now=now).task
    store.claim(HOST, "resize", settings=settings, worker="box-1", now=now + 1000)
    store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
               result=BODY, now=now + 2000)  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    return task


def test_a_multi_line_string_is_shown_as_its_lines_and_the_rest_as_indented_json() -> None:
    html = readable_json_html({"exit": 3, "stderr": "one\n  two <b>\n", "tags": ["a"]})
    q = "&quot;"
    assert html.startswith(f'{{\n  {q}exit{q}: 3,\n  {q}stderr{q}: <span class="json-text depth-1"')
    assert ">one\n  two &lt;b&gt;</span>" in html  # its own lines, escaped, the end trimmed
    assert f"  {q}tags{q}: [\n    {q}a{q}\n  ]\n}}" in html
    # Without a text of several lines it is the JSON it was, escaped.
    assert readable_json_html({"x": "<y>", "n": [1, None]}) == (
        f"{{\n  {q}x{q}: {q}&lt;y&gt;{q},\n  {q}n{q}: [\n    1,\n    null\n  ]\n}}"
    )
    assert readable_json_html({}) == "{}" and readable_json_html("a\nb").startswith("<span")


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (BODY, "ValueError: <cat>.png is not an image"),
        ({"traceback": TRACEBACK}, "Traceback (most recent call last):"),
        ({"exitCode": 3, "stderr": "\n\nno such file\nmore"}, "no such file"),
        ("plain words\nsecond", "plain words"),
        ({"code": 7}, '{"code": 7}'),
        (None, ""),
        ({"error": "x" * 500}, "x" * 159 + "…"),
    ],
)
def test_the_error_line_is_the_first_line_of_the_reason(body, line) -> None:
    assert error_line(body) == line


def test_the_task_page_shows_the_traceback_as_wrapped_lines(staff, make_queue, day_dir) -> None:
    task = failed_task(make_queue, day_dir, archive=False)
    html = staff.get(reverse("queues:task", args=[HOST, "resize", task.id])).content.decode()
    failure = html[html.index("<h2>Failure</h2>") :]
    assert '<pre class="payload readable">{\n  &quot;error&quot;' in failure
    assert "  File &quot;/srv/app/resize.py&quot;, line 12, in handle\n    raise" in failure
    assert "\\n" not in failure[: failure.index("</pre>")]  # no literal \n left


def test_the_archived_payload_page_shows_the_traceback_as_lines(staff, make_queue, day_dir):
    task = failed_task(make_queue, day_dir, archive=True)
    view = payload_url(HOST, "resize", task.id, "result", attempts=1, event="failed")
    html = staff.get(view).content.decode()
    shown = re.search(r'<pre class="payload-text readable">(.*?)</pre>', html, re.S).group(1)
    assert '<span class="json-text depth-1"' in shown and "\\n" not in shown
    assert "ValueError: &lt;cat&gt;.png is not an image</span>" in shown


@pytest.mark.parametrize("archive", [True, False], ids=["archived", "from-the-record"])
def test_task_logs_shows_the_errors_first_line_and_keeps_sizes_in_details(
    staff, make_queue, day_dir, archive
) -> None:
    """From the archived body when the queue keeps payloads, else from the task's record."""
    task = failed_task(make_queue, day_dir, archive=archive)
    html = staff.get(reverse("tasklogs:events"), {"task": task.id}).content.decode()
    assert "error B" not in html and "<th>error</th>" in html
    failed_row = next(row for row in re.findall(r"<tr>(.*?)</tr>", html, re.S) if "failed" in row)
    error = re.search(r'<td class="tasklogs-error[^"]*">(.*?)</td>', failed_row).group(1)
    assert error == '<span class="bad">ValueError: &lt;cat&gt;.png is not an image</span>'
    assert "<details><summary>sizes</summary>" in failed_row and "<dt>result</dt>" in failed_row


def test_recent_failures_show_the_errors_first_line(staff, make_queue, day_dir) -> None:
    failed_task(make_queue, day_dir, archive=True)
    html = staff.get("/").content.decode()
    section = html[html.index('id="failures-title"') :]
    assert "bytes of error" not in section
    assert 'failed: <span class="bad">ValueError: &lt;cat&gt;.png is not an image</span>' in section


def test_a_failure_whose_task_is_gone_still_says_why(staff, make_queue, day_dir) -> None:
    """Its event line said why: neither the archive nor the record is needed any more."""
    task = failed_task(make_queue, day_dir, archive=False)
    stores.of(HOST, "resize").delete(HOST, "resize", task.id)
    html = staff.get("/").content.decode()
    section = html[html.index('id="failures-title"') :]
    assert 'failed: <span class="bad">ValueError: &lt;cat&gt;.png is not an image</span>' in section


@pytest.mark.parametrize("archive", [True, False], ids=["archived", "from-the-record"])
def test_a_task_timeline_shows_the_time_between_events_and_the_errors_first_line(
    staff, make_queue, day_dir, archive
) -> None:
    task = failed_task(make_queue, day_dir, archive=archive)  # posted, then 1 s, then 1 s
    html = staff.get(reverse("tasklogs:task", args=[HOST, "resize", task.id])).content.decode()
    assert "error B" not in html and "item B" not in html and "<th>error</th>" in html
    rows = [row for row in re.findall(r"<tr>(.*?)</tr>", html, re.S) if "tasklogs-after" in row]
    after = [re.search(r'class="num tasklogs-after"[^>]*>(.*?)</td>', row).group(1) for row in rows]
    assert after == ["", "+1.0 s", "+1.0 s"]  # the first row has none before it
    failed_row = rows[-1]
    error = re.search(r'<td class="tasklogs-error[^"]*">(.*?)</td>', failed_row).group(1)
    assert error == '<span class="bad">ValueError: &lt;cat&gt;.png is not an image</span>'
    assert "<details><summary>sizes</summary>" in failed_row and "<dt>result</dt>" in failed_row
    assert all('tasklogs-error card-wide card-early"></td>' in row for row in rows[:-1])


def test_every_attempts_error_stays_on_its_row_before_and_after_an_operators_retry(
    staff, make_queue, day_dir
) -> None:
    """Issue 36: without an archive, a retried attempt's row said a bare `requeue`, and an
    operator's retry blanked the failed row's error in Task Logs and Recent failures."""
    queue = make_queue(HOST, "resize", archive_payloads=False, max_attempts=2, backoff_seconds=1)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    now = DAY1 * 1000
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None, now=now).task
    for attempt in (1, 2):
        store.claim(HOST, "resize", settings=settings, worker="box-1", now=now + attempt * 10_000)
        store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=attempt,
                   retry=True, result={"error": f"OSError: disk {attempt} full"},
                   now=now + attempt * 10_000 + 1)  # fmt: skip
    expected = ["requeue: OSError: disk 1 full", "failed: OSError: disk 2 full"]

    def shown() -> tuple[list[str], list[str], str]:
        call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
        logs = staff.get(reverse("tasklogs:events"), {"task": task.id}).content.decode()
        rows = [row for row in re.findall(r"<tr>(.*?)</tr>", logs, re.S) if "tasklogs-error" in row]
        errors = [re.sub(r"<[^>]+>", "", re.search(r'tasklogs-error[^>]*>(.*?)</td>', row).group(1))
                  for row in rows]  # fmt: skip
        page = staff.get(reverse("queues:task", args=[HOST, "resize", task.id])).content.decode()
        table = page[page.index('<table class="attempts cards">') :]
        table = table[: table.index("</table>")]
        how = [re.sub(r"<[^>]+>", "", cell).strip()
               for cell in re.findall(r'data-label="how">(.*?)</td>', table)]  # fmt: skip
        dashboard = staff.get("/").content.decode()
        return [e for e in errors if e], how, dashboard[dashboard.index('id="failures-title"') :]

    errors, how, failures = shown()
    assert errors == ["OSError: disk 2 full", "OSError: disk 1 full"]  # newest first
    assert how == expected
    assert 'failed: <span class="bad">OSError: disk 2 full</span>' in failures
    store.retry(HOST, "resize", task.id, settings=settings, now=now + 30_000, by="root")
    errors, how, failures = shown()
    assert errors == ["OSError: disk 2 full", "OSError: disk 1 full"]
    assert how == expected
    assert 'failed: <span class="bad">OSError: disk 2 full</span>' in failures


@pytest.mark.parametrize("alike", [True, False], ids=["alike", "different"])
def test_the_task_page_says_the_end_in_words_and_one_box_for_one_failure(
    staff, make_queue, day_dir, alike
) -> None:
    """Issue 36: the page said `error: attempts`, and a task whose last two attempts failed
    alike showed the same body under Failure and under Last failure before the retry."""
    queue = make_queue(HOST, "resize", max_attempts=2, backoff_seconds=1)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    now = DAY1 * 1000
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None, now=now).task
    for attempt in (1, 2):
        store.claim(HOST, "resize", settings=settings, worker="box-1", now=now + attempt * 10_000)
        body = {"error": "exit 3" if alike else f"exit {attempt}"}
        store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=attempt,
                   retry=True, result=body, now=now + attempt * 10_000 + 1)  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    html = staff.get(reverse("queues:task", args=[HOST, "resize", task.id])).content.decode()
    assert (
        '<th scope="row">ended by</th><td class="bad" title="attempts">attempts used up (2 of 2)'
        in html
    )
    assert ">attempts</td>" not in html
    assert html.count("<h2>Failure</h2>") == 1
    assert "<h2>Last failure before the retry</h2>" not in html  # alike or not: one end
    assert f"exit {1 if not alike else 3}" in html  # the earlier attempt's line, in its row
