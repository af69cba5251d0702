"""`manage.py serve` (what `make run` runs): everything starts together, a part that dies is
started again while the others run on, and Ctrl-C or SIGTERM stops every process it started,
with an event stream open, within gunicorn's graceful_timeout."""

import http.client
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.migrated import migrate

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

GRACEFUL_TIMEOUT = runpy.run_path(str(ROOT / "gunicorn.conf.py"))["graceful_timeout"]
STOP_MARGIN = 10  # serve's own margin after the grace, and this machine's slowness


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def site_env(tmp_path):
    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"),
        "TASKHOSTER_FSYNC": "0", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_METRICS_DIR": "metrics",  # under var/, not in /dev/shm
    }  # fmt: skip
    migrate(env)
    return env


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(line) for line in found.split()]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def test_serve_runs_web_sweep_and_ingest_and_ctrl_c_stops_them_all(site_env):
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT, env=site_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not answers(f"http://127.0.0.1:{port}/admin/login/"):
            assert time.monotonic() < deadline, "the web server never answered"
            assert serve.poll() is None, "serve ended early"
            time.sleep(0.3)
        children = children_of(serve.pid)
        assert len(children) == 3  # gunicorn, sweep --loop, ingest_tasklogs --follow
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 0
        assert not answers(f"http://127.0.0.1:{port}/admin/login/")
        for child in children:
            assert (
                not Path(f"/proc/{child}").exists()
                or "zombie" in Path(f"/proc/{child}/status").read_text()
            )
    finally:
        if serve.poll() is None:
            serve.kill()


def test_serve_stops_everything_and_fails_when_one_part_cannot_start(site_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = subprocess.run(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}",
             "--start-seconds", "60"],
            cwd=ROOT, env=site_env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert serve.returncode == 1
    assert "web exited with code 1" in serve.stderr and "cannot start" in serve.stderr
    assert "RESTART" not in serve.stderr


# --- a real server, its parts killed and stopped ----------------------------------------------


class Served:
    """A `manage.py serve` in a session of its own on a free port, its output in files."""

    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/admin/login/"
        self.err_path = tmp_path / "serve.err"
        with open(tmp_path / "serve.out", "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{self.port}",
                 "--start-seconds", "0", "--sweep-interval", "0.2"],
                cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip

    def wait_answering(self) -> None:
        deadline = time.monotonic() + 60
        while not answers(self.url):
            assert time.monotonic() < deadline, "the web server never answered"
            assert self.process.poll() is None, "serve ended early"
            time.sleep(0.3)

    def child(self, name: str) -> int:
        """The pid of serve's child whose command line holds `name`, once there is one."""
        deadline = time.monotonic() + 60
        while True:
            for pid in children_of(self.process.pid):
                try:
                    if (
                        name
                        in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    ):
                        return pid
                except FileNotFoundError:
                    continue
            assert time.monotonic() < deadline, f"no {name} child"
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.err_path.read_text()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in descendants(self.process.pid):
            os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, by walking /proc's parent links."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.fixture
def served(site_env, tmp_path):
    serve = Served(site_env, tmp_path)
    yield serve
    serve.kill()


@pytest.mark.parametrize("part", ["sweep --loop", "ingest_tasklogs --follow"])
def test_a_part_killed_comes_back_with_a_line_while_the_web_server_answers(served, part):
    served.wait_answering()
    web = served.child("gunicorn")
    victim = served.child(part)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while (again := served.child(part)) == victim:
        assert time.monotonic() < deadline, f"{part} never came back"
        assert answers(served.url)  # the web server serves all along
        time.sleep(0.1)
    assert again != victim and alive(again)
    assert served.child("gunicorn") == web and answers(served.url)
    name = "sweep" if part.startswith("sweep") else "ingest"
    [line] = [line for line in served.stderr().splitlines() if "RESTART" in line]
    assert line.startswith(f"serve: RESTART {name}: it was killed by SIGKILL after ")
    assert line.endswith("starting it again in 1 s")


def test_the_web_server_killed_comes_back_and_serves_again(served):
    served.wait_answering()
    master = served.child("gunicorn")
    workers = children_of(master)
    assert workers
    os.kill(master, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while served.child("gunicorn") == master or not answers(served.url):
        assert time.monotonic() < deadline, "the web server never came back"
        time.sleep(0.2)
    assert not any(alive(worker) for worker in workers)  # the old workers did not linger
    assert "serve: RESTART web: it was killed by SIGKILL" in served.stderr()


def open_event_stream(env: dict[str, str], port: int) -> http.client.HTTPResponse:
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "createqueue", "task.example.com", "resize"], cwd=ROOT, env=env,
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([*manage, "grant", "ops", "task.example.com/resize", "operator"], cwd=ROOT,
                   env=env, check=True, capture_output=True)  # fmt: skip
    token = subprocess.run([*manage, "createtoken", "ops"], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/api/v1/queues/task.example.com/resize/events",
                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    response = conn.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"retry:")  # subscribed: the stream holds a thread
    return response


def read_to_end(stream: http.client.HTTPResponse, seconds: float) -> bytes:
    """The rest of the stream; IncompleteRead if it was cut off (its worker killed), a failure
    if it is still open after `seconds` (its keep-alives would keep a plain read going)."""
    outcome: dict[str, object] = {}

    def read() -> None:
        try:
            outcome["body"] = stream.read()
        except Exception as exc:  # re-raised below, in the test's thread
            outcome["error"] = exc

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), f"the event stream was still open {seconds} s after the stop"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["body"]  # type: ignore[return-value]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_with_a_stream_open_ends_every_process_and_frees_the_port(served, site_env,
                                                                         signum):  # fmt: skip
    served.wait_answering()
    stream = open_event_stream(site_env, served.port)
    everything = descendants(served.process.pid)
    assert len(everything) >= 5  # gunicorn, its 2 workers, the sweep, the ingester
    os.killpg(served.process.pid, signum)  # as Ctrl-C reaches the terminal's process group
    # The stream is closed by the server, as a finished response, not cut off with its worker.
    rest = read_to_end(stream, GRACEFUL_TIMEOUT + STOP_MARGIN)
    assert all(line.startswith(b":") for line in rest.splitlines() if line)  # comments only
    assert served.process.wait(timeout=GRACEFUL_TIMEOUT + STOP_MARGIN) == 0
    deadline = time.monotonic() + STOP_MARGIN
    while left := [pid for pid in everything if alive(pid)]:
        assert time.monotonic() < deadline, f"still running after serve: {left}"
        time.sleep(0.1)
    with socket.socket() as probe:  # the next serve can listen there: nobody holds the port
        # as gunicorn does: the stream's closed connection may linger in TIME_WAIT
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", served.port))
        probe.listen()


@pytest.mark.django_db
def test_a_negative_start_window_is_refused():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--start-seconds must be a number of seconds"):
        call_command("serve", "--start-seconds", "-1")


@pytest.mark.django_db
@pytest.mark.parametrize("option", ["--start-seconds", "--sweep-interval"])
def test_a_number_option_not_in_ascii_digits_is_refused(option):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=f"{option}: the value must be a number in the digits"):
        call_command("serve", option, "nan")
