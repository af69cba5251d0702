"""The `taskhoster` command line: post, read, cancel, retry, list, work and watch over HTTP.

Standard library only. Exit statuses (docs/cli.md):
0 done, 1 the task failed or was cancelled, 2 usage, 3 the server cannot be reached (or the URL
is wrong), 4 authentication or permission refused, 5 not found (host, queue or task),
6 input refused (by this command or the server), 7 the server failed or stayed busy.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from . import backoff
from .client import VERSION, ApiError, Client
from .log_format import handler_for, level_for
from .numerals import integer_option, number_option
from .task_table import how_it_ended, table
from .worker import Cancelled, Fail, Job, Retry, failure_summary, run_worker

OK, TASK_FAILED, USAGE, UNREACHABLE, AUTH, NOT_FOUND, REFUSED, SERVER = range(8)
TERMINAL = ("finished", "failed", "cancelled")
TRANSIENT_TRIES = 5  # a producer call that met 429/5xx or a refused connection
STDERR_TAIL_CHARS = 2000  # what a failed command's report keeps of its standard error
WAIT_STEP_SECONDS = 30  # one waiting read of --wait
WATCH_PAUSE_MOST = 5.0  # the longest pause between a broken watch's reconnects

USER_AGENT = f"taskhoster-cli/{VERSION}"

T = TypeVar("T")
command_log = logging.getLogger("taskhoster.command")


class OutputClosed(Exception):
    """Standard output's reader is gone (`taskhoster list ... | head -1`): a normal end."""


def out(text: str) -> None:
    """A line on standard output; a reader that closed the pipe ends the command quietly."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        raise OutputClosed from None


class CliError(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(message)


# -- arguments ----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=None,
        help="the server, e.g. https://tasks.example.com (default $TASKHOSTER_URL)",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("TASKHOSTER_TOKEN"),
        help="an API token (default $TASKHOSTER_TOKEN)",
    )
    top = argparse.ArgumentParser(
        prog="taskhoster",
        description="Put tasks in a taskhoster queue, work them off, and follow them.",
        epilog="Exit statuses: 0 ok, 1 task failed or cancelled, 2 usage, 3 server unreachable "
        "or wrong URL, 4 token refused, 5 not found, 6 input refused, 7 server error.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=text, description=text)
        sub.add_argument("target", metavar="HOST/QUEUE", help="the queue, e.g. ex.com/resize")
        return sub

    post = command("post", "Post a task (its item is a JSON object) and print its id.")
    post.add_argument(
        "item",
        nargs="?",
        metavar="ITEM_JSON",
        help="the item; '-' or nothing reads it from standard input",
    )
    post.add_argument(
        "--from-file",
        metavar="FILE",
        help="post one task per line of this JSON-lines file ('-': stdin)",
    )
    post.add_argument("--delay", type=integer_option, help="seconds before it may be claimed")
    post.add_argument("--priority", type=integer_option, help="-100 to 100, higher claimed first")
    post.add_argument(
        "--after",
        action="append",
        metavar="ID",
        help="run only after this task finished (an id of the queue, or QUEUE/ID of another "
        "queue of the host); may be given more than once",
    )
    post.add_argument(
        "--on-dependency-failure",
        choices=["fail", "cancel"],
        help="what a failed --after task does to this one (default: fail it)",
    )
    post.add_argument(
        "--key",
        help="an idempotency key: posting it again returns the same task "
        "(with --from-file, KEY-LINE for each line)",
    )
    post.add_argument(
        "--key-concurrency",
        metavar="KEY",
        help="a concurrency key: at most the queue's maxPerKey tasks with this key run at once",
    )
    post.add_argument(
        "--group",
        metavar="G",
        help="the group the task (with --from-file: every task) joins",
    )
    post.add_argument(
        "--on-complete-queue",
        metavar="Q",
        help="close the group with this post (with --from-file: its last task): once every task "
        "of the group has ended, a task is posted into this queue of the host",
    )
    post.add_argument(
        "--on-complete",
        metavar="JSON",
        help="the item of that task (default {}); its 'group' key gets the group's outcome",
    )
    post.add_argument(
        "--wait",
        action="store_true",
        help="wait for the task to end and print its result (exit 1 if it failed)",
    )
    json_help = "print JSON lines (the status view), as when standard output is not a terminal"
    for name, text in (
        ("status", "Print a task's status: a table row on a terminal, else JSON."),
        ("cancel", "Cancel a task (a running one when its worker stops)."),
        ("retry", "Put a failed or cancelled task back to pending."),
    ):
        viewer = command(name, text)
        viewer.add_argument("id", metavar="ID", help="the task's id")
        viewer.add_argument("--json", action="store_true", help=json_help)
    listing = command(
        "list", "List tasks, newest first: a table on a terminal, else one JSON line each."
    )
    listing.add_argument("--json", action="store_true", help=json_help)
    listing.add_argument("--status", choices=("pending", "processing", *TERMINAL))
    listing.add_argument(
        "--limit", type=integer_option, default=50, help="at most this many (default 50)"
    )
    work = command(
        "work",
        "Run COMMAND once per task: the item on its standard input, its "
        "standard output the result.",
    )
    work.add_argument(
        "--concurrency", type=integer_option, default=1, help="commands at once (default 1)"
    )
    work.add_argument(
        "--worker",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this worker's name (default HOSTNAME-PID)",
    )
    work.add_argument(
        "--lease", type=integer_option, default=60, help="seconds a claim holds a task"
    )
    work.add_argument(
        "--grace",
        type=number_option,
        default=10,
        help="seconds between SIGTERM and SIGKILL for a cancelled command",
    )
    work.add_argument("--claim-wait", type=integer_option, default=5, help=argparse.SUPPRESS)
    loudness = work.add_mutually_exclusive_group()
    loudness.add_argument(
        "--quiet", action="store_true", help="log only warnings: no banner, no line per task"
    )
    loudness.add_argument(
        "--verbose", action="store_true", help="also log each line the commands write to stderr"
    )
    work.add_argument(
        "--log-format",
        choices=("human", "json"),
        default="human",
        help="the log on standard error: for people (default) or one JSON object per line",
    )
    work.usage = "taskhoster work HOST/QUEUE [options] -- COMMAND ARGS..."
    watch = command("watch", "Print the queue's live events, one line each (Ctrl-C ends).")
    watch.add_argument("--task", metavar="ID", help="only this task's events")
    return top


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # Everything after "--" is the command `work` runs, options and all.
    split = words.index("--") if "--" in words else len(words)
    args = parser().parse_args(words[:split])
    args.argv = words[split + 1 :]
    # the name of what gave the URL, for a message about it
    url_from = "--url" if args.url else "TASKHOSTER_URL"
    args.url = args.url or os.environ.get("TASKHOSTER_URL")
    try:
        if not args.url:
            raise CliError(USAGE, "no server: set TASKHOSTER_URL or pass --url")
        host, _, queue = args.target.partition("/")
        if not host or not queue or "/" in queue:
            raise CliError(USAGE, f"HOST/QUEUE expected, e.g. ex.com/resize (got {args.target!r})")
        try:
            # tries=1: every call below is retried here, on one schedule, not twice over
            client = Client(args.url, args.token, timeout=30, tries=1, user_agent=USER_AGENT)
        except ValueError:
            raise CliError(UNREACHABLE, url_problem(url_from, args.url)) from None
        return int(COMMANDS[args.command](client, host, queue, args))
    except OutputClosed:
        # Python would say so again when it flushes standard output at exit: point it elsewhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return OK
    except CliError as exc:
        print(f"taskhoster: {exc.message}", file=sys.stderr)
        return exc.status
    except ApiError as exc:
        print(f"taskhoster: {exc.detail} ({exc.status} {exc.code})", file=sys.stderr)
        return exit_status(exc)
    except (OSError, http.client.HTTPException) as exc:
        print(f"taskhoster: cannot reach {args.url}: {exc}", file=sys.stderr)
        return UNREACHABLE
    except KeyboardInterrupt:
        return 130


def url_problem(name: str, url: str) -> str:
    said = f"{name} must be http(s)://host[:port][/prefix], not {url!r}"
    if "://" not in url:  # a bare host:port, the likeliest slip
        said += f" (did you mean http://{url}?)"
    return said


def exit_status(exc: ApiError) -> int:
    if exc.status in (401, 403):
        return AUTH
    if exc.status == 404:
        return NOT_FOUND
    if exc.status == 429 or exc.status >= 500:  # busy or failing, after the retries
        return SERVER
    return REFUSED


def with_backoff(call: Callable[[], T], *, repeatable: bool = False) -> T:
    """A producer's call, tried again on backoff.py's policy: after a refused connection or a
    `429`/`503` (nothing was done), and when `repeatable` (a read, a keyed post) after a broken
    connection or another `5xx` too. The first failure is said at once on stderr."""
    return backoff.with_backoff(call, tries=TRANSIENT_TRIES, repeatable=repeatable, say=say)


def say(line: str) -> None:
    print(f"taskhoster: {line}", file=sys.stderr, flush=True)


def print_json(value: Any) -> None:
    out(json.dumps(value, ensure_ascii=False))


# -- producers -----------------------------------------------------------------------------------


def parse_item(text: str, where: str) -> dict[str, Any]:
    try:
        item = json.loads(text)
    except ValueError as exc:
        raise CliError(REFUSED, f"{where} is not JSON: {exc}") from None
    if not isinstance(item, dict):
        raise CliError(REFUSED, f"{where} must be a JSON object (got {type(item).__name__})")
    return item


def on_complete(args: argparse.Namespace) -> dict[str, Any]:
    """The closing post's keyword arguments: --on-complete-queue and --on-complete's item."""
    if args.on_complete_queue is None:
        if args.on_complete is not None:
            raise CliError(USAGE, "--on-complete needs --on-complete-queue")
        return {}
    if args.group is None:
        raise CliError(USAGE, "--on-complete-queue needs --group")
    item = {} if args.on_complete is None else parse_item(args.on_complete, "--on-complete")
    return {"on_complete_queue": args.on_complete_queue, "on_complete": item}


def items(args: argparse.Namespace) -> list[tuple[dict[str, Any], str | None]]:
    """The items to post, each with its idempotency key. A file is checked whole first: one bad
    line refuses it all, naming every bad line, so nothing is posted from a file half right."""
    if not args.from_file:
        text = sys.stdin.read() if args.item in (None, "-") else args.item
        return [(parse_item(text, "the item"), args.key)]
    if args.item is not None:
        raise CliError(USAGE, "give ITEM_JSON or --from-file, not both")
    try:
        stream = sys.stdin if args.from_file == "-" else open(args.from_file, encoding="utf-8")  # noqa: SIM115
        with stream:
            lines = list(enumerate(stream, 1))
    except (OSError, UnicodeDecodeError) as exc:  # not the server's: said as the file's
        raise CliError(REFUSED, f"cannot read {args.from_file}: {exc}") from None
    found, bad = [], []
    for number, line in lines:
        if not line.strip():
            continue
        try:
            item = parse_item(line, f"line {number}")
        except CliError as exc:
            bad.append(exc.message)
            continue
        found.append((item, f"{args.key}-{number}" if args.key else None))
    if bad:
        raise CliError(
            REFUSED,
            f"{args.from_file}: {len(bad)} bad line(s), nothing was posted\n  " + "\n  ".join(bad),
        )
    return found


def post(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    posted = []
    closing = on_complete(args)
    todo = items(args)
    for n, (item, key) in enumerate(todo, 1):
        last = closing if n == len(todo) else {}  # the last post closes the group
        task = with_backoff(
            lambda item=item, key=key, last=last: client.post(
                host,
                queue,
                item,
                delay=args.delay,
                priority=args.priority,
                idempotency_key=key,
                after=args.after,
                on_dependency_failure=args.on_dependency_failure,
                concurrency_key=args.key_concurrency,
                group=args.group,
                **last,
            ),
            repeatable=key is not None,
        )
        posted.append(task)
        if not args.wait:
            out(task["id"])
    if not args.wait:
        return OK
    status = OK
    for task in posted:
        final = wait_for_end(client, host, queue, task)
        print_json(final.get("result"))
        if final["status"] != "finished":
            how = how_it_ended(final)
            print(f"taskhoster: task {task['id']} {final['status']}" + (f": {how}" if how else ""),
                  file=sys.stderr)  # fmt: skip
            status = TASK_FAILED
    return status


def wait_for_end(client: Client, host: str, queue: str, task: dict[str, Any]) -> dict[str, Any]:
    """The task once it ended; on the way, a line on stderr for each attempt that failed and
    would be retried, so a wait through retries is not silent."""
    said = 0  # the attempts whose failure was said
    while task["status"] not in TERMINAL:
        task = with_backoff(
            lambda task=task: client.get(
                host, queue, task["id"], wait=WAIT_STEP_SECONDS, since=task["updatedAt"]
            ),
            repeatable=True,
        )
        said = say_failed_attempt(task, said)
    return task


def say_failed_attempt(task: dict[str, Any], said: int) -> int:
    """Say the last failed attempt of a task that will run again, unless it was said; answers
    the attempts said so far."""
    if task["status"] in TERMINAL or task.get("lastError") is None:
        return said
    # a pending task's attempts have all ended; a processing one's last is running
    failed = int(task["attempts"]) - (1 if task["status"] == "processing" else 0)
    if failed <= said:
        return said
    budget = task.get("maxAttempts")
    of = f" of {budget}" if budget else ""
    reason = failure_summary(task["lastError"])
    line = f"taskhoster: task {task['id']} attempt {failed}{of} failed ({reason})"
    available = task.get("availableAt")
    if task["status"] == "pending" and isinstance(available, int | float):
        line += f"; retrying in {max(available / 1000 - time.time(), 0):.0f} s"
    elif task["status"] == "processing":
        line += f"; attempt {failed + 1} is running"
    print(line, file=sys.stderr, flush=True)
    return failed


def show(tasks: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    """A table for a person at a terminal; JSON lines for `--json` and for a pipe or a file.
    Answers whether it was the table."""
    if args.json or not sys.stdout.isatty():
        for task in tasks:
            print_json(task)
        return False
    out(table(tasks))
    return True


def status(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    task = with_backoff(lambda: client.get(host, queue, args.id), repeatable=True)
    if show([task], args) and task.get("why"):  # JSON has it as a field
        out(f"why: {task['why']}")
    return OK


def cancel(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    show([with_backoff(lambda: client.cancel(host, queue, args.id))], args)
    return OK


def retry(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    show([with_backoff(lambda: client.retry(host, queue, args.id))], args)
    return OK


def list_tasks(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(USAGE, f"--limit must be at least 1 (got {args.limit})")
    tasks: list[dict[str, Any]] = []
    while (shown := len(tasks)) < args.limit:
        page = with_backoff(
            lambda shown=shown: client.list(
                host, queue, status=args.status, offset=shown, limit=min(args.limit - shown, 200)
            ),
            repeatable=True,
        )
        tasks.extend(page["results"])
        if not page.get("next") or not page["results"]:
            break
    show(tasks, args)
    return OK


# -- workers -------------------------------------------------------------------------------------


class CommandFailed(Exception):
    """A command that exited non-zero or was killed: its failure body says how."""

    kind = "CommandFailed"  # the body's type, retried or not

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


class CommandRetry(CommandFailed, Retry):
    pass


class CommandFail(CommandFailed, Fail):
    pass


class CommandRunner:
    """Runs the command for one job; ends it (SIGTERM, then SIGKILL after `grace`) when the
    task's cancel is requested, its lease is lost, or the worker leaves without waiting."""

    def __init__(self, argv: list[str], grace: float) -> None:
        self.argv, self.grace = argv, grace

    def __call__(self, job: Job) -> Any:
        # The command is the operator's own argv, run without a shell. In a process group of
        # its own: a terminal's Ctrl-C goes to the whole foreground group, and the first one
        # is `work`'s to handle (let the commands finish), not the commands' to die of.
        err_read, err_write = os.pipe()
        try:
            proc = subprocess.Popen(  # noqa: S603
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err_write,
                process_group=0,
            )
        finally:
            os.close(err_write)
        outputs: list[bytes] = []
        err = bytearray()
        feed = json.dumps(job.item).encode()

        def talk() -> None:
            stderr = threading.Thread(target=_read_stderr, args=(job, err_read, err), daemon=True)
            stderr.start()
            outputs.append(proc.communicate(feed)[0])
            stderr.join()

        talking = threading.Thread(target=talk, daemon=True)
        talking.start()
        ended_by = None
        while talking.is_alive():
            talking.join(0.2)
            if ended_by is None and talking.is_alive():
                ended_by = self._reason_to_end(job)
                if ended_by is not None:
                    threading.Thread(target=self._end, args=(proc,), daemon=True).start()
        out = outputs[0] if outputs else b""
        if ended_by == "cancel":
            raise Cancelled("cancelled: the command was terminated")
        if proc.returncode == 0 and ended_by is None:
            return command_result(out)
        raise self._failure(job, proc.returncode, bytes(err))

    @staticmethod
    def _reason_to_end(job: Job) -> str | None:
        if job.cancel_requested.is_set():
            return "cancel"
        if job.lease_lost.is_set() or job.abandoned.is_set():
            return "leaving"
        return None

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)

    @staticmethod
    def _failure(job: Job, code: int, err: bytes) -> CommandFailed:
        tail = err.decode(errors="replace")[-STDERR_TAIL_CHARS:]
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        details = {"exitCode": code, "stderr": tail}
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        message = f"the command {how}" + (f": {last}" if last else "")
        # Retried while the task's attempt budget lasts, as a handler's exception is.
        return (CommandRetry if job.max_attempts else CommandFail)(message, details)


def _read_stderr(job: Job, fd: int, kept: bytearray) -> None:
    """Keep the tail of a command's standard error, and log each of its lines at DEBUG (shown
    with `--verbose`)."""
    with os.fdopen(fd, "rb") as stream:
        # a line is read in pieces of at most 8 KiB, so a command that never ends one
        # costs no more memory than that
        for piece in iter(lambda: stream.readline(8192), b""):
            kept.extend(piece)
            del kept[: -STDERR_TAIL_CHARS * 4]  # bytes: enough for the tail's characters
            if command_log.isEnabledFor(logging.DEBUG):
                line = piece.decode(errors="replace").rstrip("\r\n")
                fields = {"event": "stderr", "task": job.id, "line": line}
                command_log.debug("task %s stderr: %s", job.id, line, extra=fields)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the command's process group: what it started too, which may hold its output
    open after it exited. The group's id is not handed to another process while any of the
    group lives, so this reaches no one else."""
    with contextlib.suppress(ProcessLookupError):  # the whole group ended meanwhile
        os.killpg(proc.pid, signum)


def _signal_name(number: int) -> str:
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


def command_result(out: bytes) -> Any:
    """Standard output as the result: JSON when it parses, else the text without its last
    newline as a string; no output at all is None (the worker reports `{}`)."""
    if not out:
        return None
    text = out.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text.removesuffix("\n")


def work(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    argv = args.argv
    if not argv:
        raise CliError(USAGE, "work needs a command: taskhoster work HOST/QUEUE -- COMMAND ARGS...")
    if shutil.which(argv[0]) is None:
        raise CliError(USAGE, f"no such command: {argv[0]}")
    if args.concurrency < 1:
        raise CliError(USAGE, f"--concurrency must be at least 1 (got {args.concurrency})")
    root = logging.getLogger()
    root.addHandler(handler_for(args.log_format))
    root.setLevel(level_for(args.quiet, args.verbose))
    stop, abandon = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if stop.is_set():
            logging.info(
                "second signal: ending the running commands; their leases bring the tasks back"
            )
            abandon.set()
        else:
            logging.info("stopping: no more claims; waiting for the running commands")
            stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runner = CommandRunner(argv, args.grace)
    run_worker(
        client,
        host,
        queue,
        args.worker,
        runner,
        lease=args.lease,
        wait=args.claim_wait,
        stop_event=stop,
        abandon_event=abandon,
        concurrency=args.concurrency,
    )
    if abandon.is_set():
        time.sleep(min(args.grace, 5) + 0.5)  # the commands' SIGTERM (and SIGKILL) go out
    return OK


# -- monitors ------------------------------------------------------------------------------------


def watch(client: Client, host: str, queue: str, args: argparse.Namespace) -> int:
    """One line per event; reconnects after a dropped stream from where it was. A task's
    watch starts with its events so far (the stream's `from=posted`), then follows.

    On standard error: one line when the stream opens, and for a break (the server restarting)
    one line when it breaks and one when it is back; the reconnects between back off
    (backoff.py's schedule, at most WATCH_PAUSE_MOST apart) and say nothing."""
    path = f"{client.prefix}/queues/{host}/{queue}/events"
    what = f"{host}/{queue}"
    if args.task:
        path += f"?task={args.task}&from=posted"
        what = f"task {args.task} of {what}"
    last_id: str | None = None
    caught_up = False
    opened = False  # the stream answered once: a later failure is a break, not a wrong URL
    broke_at: float | None = None
    pauses = backoff.schedule(None, WATCH_PAUSE_MOST)

    def on_open() -> None:
        nonlocal opened, broke_at
        if not opened:
            say(f"following {what} at {client.base_url} (Ctrl-C ends)")
        elif broke_at is not None:
            say(f"back: following {what} again after {time.monotonic() - broke_at:.0f} s")
        opened, broke_at = True, None

    def on_caught_up(shown: int, status: str | None) -> bool:
        """The history is out (`status`: the task's state after the last event shown). A task
        it says nothing of (its lines pruned from the log) is read and said where it stands
        now; a read only then, since a producer's read of an ended task is itself an event
        (`fetched`). Answers whether to go on: an ended task has no more."""
        nonlocal caught_up
        if not args.task or caught_up:
            return True
        caught_up = True
        if not shown:
            task = with_backoff(lambda: client.get(host, queue, args.task), repeatable=True)
            out(event_line("now", {**task, "at": iso_utc(task["updatedAt"])}))
            status = task["status"]
        return status not in TERMINAL

    while True:
        try:
            last_id = follow(client, path, last_id, on_caught_up=on_caught_up, on_open=on_open)
            if last_id is STOPPED:
                return OK
        except (ApiError, OSError, http.client.HTTPException) as exc:
            if not opened or (
                isinstance(exc, ApiError) and not backoff.retryable(exc, repeatable=True)
            ):
                if isinstance(exc, ApiError):
                    # the server's hint is for the URL; this user types an option
                    exc.detail = exc.detail.replace("(?task=ID)", "(taskhoster watch --task ID)")
                raise
            if broke_at is None:
                broke_at = time.monotonic()
                pauses = backoff.schedule(None, WATCH_PAUSE_MOST)
                say(f"stream broke ({backoff.reason(exc)}); reconnecting")
            time.sleep(backoff.pause_for(exc, next(pauses)))
            continue
        time.sleep(0.5)  # the server ended the stream (its restart ends them first): come back


STOPPED = "stopped"  # follow's answer when on_caught_up said not to go on
CAUGHT_UP = ": caught up"  # a history stream's comment: what follows is live


def iso_utc(epoch_ms: int) -> str:
    """An epoch-ms time as the event lines write `at`."""
    seconds, ms = divmod(int(epoch_ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def follow(
    client: Client,
    path: str,
    last_id: str | None,
    on_caught_up: Callable[[int, str | None], bool] | None = None,
    on_open: Callable[[], None] | None = None,
) -> str | None:
    """Print the stream's events until it ends; `on_open()` once the server answered it, and
    `on_caught_up(events shown, the status after the last)`, at a history stream's
    `: caught up`, answers whether to go on."""
    cls = http.client.HTTPSConnection if client.scheme == "https" else http.client.HTTPConnection
    conn = cls(client.netloc, timeout=60)  # the server sends a comment every 15 s
    headers = {"Accept": "text/event-stream", "User-Agent": client.user_agent}
    if client.token:
        headers["Authorization"] = f"Bearer {client.token}"
    if last_id:
        headers["Last-Event-ID"] = last_id
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    if response.status >= 400:
        body = response.read()
        info = json.loads(body) if body.startswith(b"{") else {}
        raise ApiError(
            response.status,
            info.get("code", "http_error"),
            info.get("detail", body[:200].decode(errors="replace")),
        )
    if on_open is not None:
        on_open()
    message: dict[str, str] = {}
    shown, status = 0, None
    while True:
        raw = response.readline()
        if not raw:
            return last_id
        line = raw.decode(errors="replace").rstrip("\r\n")
        if line == "":
            if "data" in message and "event" in message:
                last_id = message.get("id", last_id)
                data = json.loads(message["data"])
                out(event_line(message["event"], data))
                shown, status = shown + 1, data.get("status")
            message = {}
        elif line == CAUGHT_UP:
            if on_caught_up is not None and not on_caught_up(shown, status):
                conn.close()
                return STOPPED
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            message[name] = value.removeprefix(" ")


def event_line(event: str, data: dict[str, Any]) -> str:
    parts = [str(data.get("at", "")), event, str(data.get("id", "")), str(data.get("status", ""))]
    for name in ("attempts", "worker", "error"):
        if data.get(name) not in (None, ""):
            parts.append(f"{name}={data[name]}")
    return " ".join(parts)


COMMANDS: dict[str, Callable[[Client, str, str, argparse.Namespace], int]] = {
    "post": post,
    "status": status,
    "cancel": cancel,
    "retry": retry,
    "list": list_tasks,
    "work": work,
    "watch": watch,
}


def run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    run()
