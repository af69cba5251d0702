"""gunicorn settings used by `make run` and production (`gunicorn -c gunicorn.conf.py`).

gthread, 2 workers x 64 threads (each overridable from the environment). A waiting claim,
a long-polling GET and an event stream each hold one thread for up to 60 s (a stream for
hours), so workers x threads is how many of them the server can hold while still answering
everything else; past it, new requests queue behind the waits. An idle thread costs about
0.25 MB and no CPU, so the pool is sized for waiting, not for CPU.

Measured on the shared 2-core machine (bench/gunicorn_compare.py, trivial bearer-authenticated
DRF POST, 4 keep-alive clients, median of 3 interleaved rounds; then 100 claims held waiting):

    server                   req/s  vs sync | with 100 waiting: req/s  errors  RSS
    sync, 2 workers            120    1.00x |                       0       4  +0 MB
    gthread, 2 x 4 threads     247    2.06x |                       0       4  +1 MB
    gthread, 2 x 8 threads     248    2.07x |                       0       4  +2 MB
    gthread, 2 x 64 threads    309    2.58x |                     621       0  +32 MB
    uvicorn ASGI, 2 workers     73    0.61x |                      73       0  +33 MB

sync workers serve one request each and close keep-alive connections, and any waiting claim
freezes a whole process. With 8 or 16 threads in all, 100 waiting claims take every thread and
other requests time out (bench/http_bench.py: 2 x 32 threads still let 3 of 4 clients time
out). Django under ASGI runs sync views in a thread per request anyway, so uvicorn gave no
memory saving and a quarter of the throughput; it would only pay with async views and an
async wake-up from the store, which is a re-architecture, not a setting.
"""

import os

from queues.store import numerals


def _count(name: str, default: str) -> int:
    """A count from the environment, in the digits 0-9 (int() would take "٣" or "1_000")."""
    try:
        return numerals.parse_integer(os.environ.get(name, default), name)
    except ValueError as exc:
        raise SystemExit(f"gunicorn.conf.py: {exc}") from None


bind = os.environ.get("TASKHOSTER_BIND", "127.0.0.1:8000")
workers = _count("TASKHOSTER_WEB_WORKERS", "2")
worker_class = os.environ.get("TASKHOSTER_WEB_WORKER_CLASS", "gthread")
threads = _count("TASKHOSTER_WEB_THREADS", "64")
# A gthread worker accepts connections while its threads are all busy and queues them behind
# the waits. The API therefore lets at most TASKHOSTER_MAX_WAITING requests and event streams
# (threads - 8 by default; streams at most half of them) hold threads per process and answers
# the rest at once (queues/api/held_threads.py), so each process always has threads for others.
# A waiting claim lasts at most 60 s; a stream sends a keep-alive every 15 s. Under gthread
# the timeout watches the worker's main loop, not one request, so a stream is not killed.
timeout = 90
# On SIGTERM a worker finishes its requests within this, then the master kills it; event
# streams end at once (queues/api/worker_stop.py). `manage.py serve` and the systemd unit wait
# longer than this before their own SIGKILL.
graceful_timeout = 20
accesslog = "-"
logger_class = "taskhoster_site.access_log.QuietAccessLogger"  # no line per successful claim
# In this installation's var/ (as settings.VAR_DIR), not gunicorn's one path in $HOME that
# every gunicorn on the machine would share.
_var = os.environ.get("TASKHOSTER_VAR_DIR", "var")
control_socket = os.path.join(os.path.dirname(os.path.abspath(__file__)), _var, "gunicorn.ctl")


def post_worker_init(worker: object) -> None:
    """Let event streams see this worker told to stop (its `alive`), and end."""
    from queues.api import worker_stop

    worker_stop.watch(worker)


# The workers' own figures (request durations, flushes, held threads) go to prometheus_client's
# multiprocess files in <var>/metrics/web/, which /metrics reads whichever worker answers
# (docs/metrics.md). Named here, in the master, before any worker imports prometheus_client.
# (The same truth as the settings' env.bool: true, on, ok, y, yes or 1.)
_metrics_on = os.environ.get("TASKHOSTER_SERVER_METRICS", "1").strip().lower() in {
    "true", "on", "ok", "y", "yes", "1"}  # fmt: skip


def on_starting(server: object) -> None:
    """A new master: tidy the workers' figures of a previous run and name the directory."""
    if _metrics_on:
        from queues.metrics import multiproc

        multiproc.prepare(os.path.join(os.path.dirname(os.path.abspath(__file__)), _var), "web")


def child_exit(server: object, worker: object) -> None:
    """A worker ended: its 'now' figures (threads held) leave the sum; its counts stay."""
    if _metrics_on and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
